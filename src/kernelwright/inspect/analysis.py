"""Per-kernel instruction summaries: resources, occupancy, the instruction histogram and the arch's distinctive
classes, from a cubin, a fatbin, an object or a CUDA extension's shared object.

    from kernelwright.inspect.analysis import analyze_cubin, analyze_binary
    [summary] = analyze_cubin(artifact.cubin, arch="sm_90a", ptxas_log=artifact.ptxas_log, threads_per_block=256)
    summary.histogram_by_class["wgmma"], summary.distinctive        # {"wgmma": True, "tma": False, ...}
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwright.errors import InputError
from kernelwright.inspect import sass
from kernelwright.inspect.ptxas import PtxasWarning, parse_ptxas_log

if TYPE_CHECKING:
    from kernelwright.inspect.triton_compile import CompiledArtifact

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class KernelSummary:
    """What one kernel's SASS shows. Spill fields are None when no ptxas log was available (a bare cubin):
    ``stack_bytes`` and LDL/STL counts then stand in. ``threads_source`` says where ``threads_per_block`` came from:
    ``"launch"`` (known launch size), ``"launch_bounds"`` (declared in the binary) or ``"max_launchable"`` (the
    largest block the registers allow, when nothing else is known)."""

    name: str
    arch: str
    origin: str  # "triton", "cubin", "fatbin", "shared-object", "object", "cuda", "ptx"
    tool: str  # the disassembler, e.g. "cuobjdump 13.1"
    registers: int
    shared_bytes: int  # static + known dynamic shared memory per block
    static_shared_bytes: int
    dynamic_shared_known: bool
    stack_bytes: int
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    threads_per_block: int | None = None
    threads_source: str = ""
    occupancy: Mapping[str, Any] | None = None  # kernelwright.hardware.Occupancy.to_json()
    instruction_count: int = 0
    histogram_by_class: Mapping[str, int] = field(default_factory=dict)
    histogram_by_opcode: Mapping[str, int] = field(default_factory=dict)
    mma_types: Mapping[str, int] = field(default_factory=dict)  # tensor-core operand type -> SASS instructions
    ptx_mma_types: Mapping[str, int] = field(default_factory=dict)  # operand type -> PTX instructions, if PTX known
    ptx_available: bool = False
    ptx_evidence: Mapping[str, int] = field(default_factory=dict)  # counts of telling PTX ops (see PTX_EVIDENCE)
    global_load_bits: Mapping[int, int] = field(default_factory=dict)  # access width in bits -> LDG count
    global_store_bits: Mapping[int, int] = field(default_factory=dict)
    distinctive: Mapping[str, bool] = field(default_factory=dict)  # the arch's distinctive classes -> present?
    ptxas_warnings: tuple[PtxasWarning, ...] = ()
    launched_as: str | None = None  # the name the candidate launched it by (the verifier's evidence sets it)

    @property
    def tensor_core_instructions(self) -> int:
        return sum(self.histogram_by_class.get(c, 0) for c in sass.TENSOR_CLASSES)

    @property
    def local_instructions(self) -> int:
        return self.histogram_by_class.get("local", 0)

    @property
    def spilled(self) -> bool | None:
        """True/False when ptxas reported spill bytes; None when unknown."""
        if self.spill_store_bytes is None and self.spill_load_bytes is None:
            return None
        return bool((self.spill_store_bytes or 0) + (self.spill_load_bytes or 0))

    @property
    def utilisation(self) -> str:
        """How many of the arch's distinctive instruction classes appear, e.g. ``"3/5"``."""
        return f"{sum(self.distinctive.values())}/{len(self.distinctive)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arch": self.arch,
            "origin": self.origin,
            "tool": self.tool,
            "registers": self.registers,
            "shared_bytes": self.shared_bytes,
            "static_shared_bytes": self.static_shared_bytes,
            "dynamic_shared_known": self.dynamic_shared_known,
            "stack_bytes": self.stack_bytes,
            "spill_store_bytes": self.spill_store_bytes,
            "spill_load_bytes": self.spill_load_bytes,
            "threads_per_block": self.threads_per_block,
            "threads_source": self.threads_source,
            "occupancy": dict(self.occupancy) if self.occupancy else None,
            "instruction_count": self.instruction_count,
            "tensor_core_instructions": self.tensor_core_instructions,
            "histogram_by_class": dict(self.histogram_by_class),
            "histogram_by_opcode": dict(self.histogram_by_opcode),
            "mma_types": dict(self.mma_types),
            "ptx_mma_types": dict(self.ptx_mma_types),
            "ptx_available": self.ptx_available,
            "ptx_evidence": dict(self.ptx_evidence),
            "global_load_bits": {str(k): v for k, v in self.global_load_bits.items()},
            "global_store_bits": {str(k): v for k, v in self.global_store_bits.items()},
            "distinctive": dict(self.distinctive),
            "utilisation": self.utilisation,
            "ptxas_warnings": [w.to_json() for w in self.ptxas_warnings],
            **({"launched_as": self.launched_as} if self.launched_as is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelSummary:
        return cls(
            name=str(data["name"]),
            arch=str(data["arch"]),
            origin=str(data.get("origin", "")),
            tool=str(data.get("tool", "")),
            registers=int(data.get("registers", 0)),
            shared_bytes=int(data.get("shared_bytes", 0)),
            static_shared_bytes=int(data.get("static_shared_bytes", 0)),
            dynamic_shared_known=bool(data.get("dynamic_shared_known", False)),
            stack_bytes=int(data.get("stack_bytes", 0)),
            spill_store_bytes=data.get("spill_store_bytes"),
            spill_load_bytes=data.get("spill_load_bytes"),
            threads_per_block=data.get("threads_per_block"),
            threads_source=str(data.get("threads_source", "")),
            occupancy=data.get("occupancy"),
            instruction_count=int(data.get("instruction_count", 0)),
            histogram_by_class=dict(data.get("histogram_by_class") or {}),
            histogram_by_opcode=dict(data.get("histogram_by_opcode") or {}),
            mma_types=dict(data.get("mma_types") or {}),
            ptx_mma_types=dict(data.get("ptx_mma_types") or {}),
            ptx_available=bool(data.get("ptx_available", False)),
            ptx_evidence=dict(data.get("ptx_evidence") or {}),
            global_load_bits={int(k): int(v) for k, v in (data.get("global_load_bits") or {}).items()},
            global_store_bits={int(k): int(v) for k, v in (data.get("global_store_bits") or {}).items()},
            distinctive=dict(data.get("distinctive") or {}),
            ptxas_warnings=tuple(
                PtxasWarning(code=w.get("code", ""), function=w.get("function", ""), message=w.get("message", ""))
                for w in data.get("ptxas_warnings") or ()
            ),
            launched_as=data.get("launched_as"),
        )


# ------------------------------------------------------------------------------------------------ PTX evidence

_PTX_ENTRY_RE = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)", re.M)
_PTX_MMA_RE = re.compile(r"\b(mma\.sync|wgmma\.mma_async|wmma\.mma\.sync|tcgen05\.mma)(?:\.[\w:]+)*")
_PTX_TYPES = {
    "f16": "fp16", "bf16": "bf16", "tf32": "tf32", "f64": "fp64", "f32": "fp32", "e4m3": "fp8", "e5m2": "fp8",
    "s8": "int8", "u8": "int8", "s4": "int4", "u4": "int4", "b1": "b1", "e2m1": "fp4", "e3m2": "fp6", "e2m3": "fp6",
    "s32": "int32",
}
_TCGEN05_KINDS = {
    "tf32": "tf32", "f16": "f16|bf16", "f8f6f4": "fp8|fp6|fp4", "i8": "int8", "mxf8f6f4": "fp8|fp6|fp4",
    "mxf4": "fp4", "mxf4nvf4": "fp4",
}


# PTX instructions that SASS does not show distinctly. A split-precision (3xTF32) fp32 matmul rounds each operand
# to TF32 (cvt.rna.tf32.f32) and subtracts to get the remainder (sub.f32); a plain TF32 matmul does neither
# (checked with Triton's input_precision="tf32" vs "tf32x3" on sm_80, sm_90a, sm_100a).
PTX_EVIDENCE = {
    "cvt_tf32": re.compile(r"\bcvt\.rna?(?:\.satfinite)?\.tf32\.f32\b"),
    "sub_f32": re.compile(r"\bsub(?:\.rn)?(?:\.ftz)?\.f32\b"),
    "setmaxnreg": re.compile(r"\bsetmaxnreg\b"),
    "cp_async_bulk_tensor": re.compile(r"\bcp\.async\.bulk\.tensor\b"),
}


def ptx_evidence(ptx: str) -> dict[str, int]:
    return {key: n for key, pattern in PTX_EVIDENCE.items() if (n := len(pattern.findall(ptx)))}


def ptx_entries(ptx: str) -> dict[str, str]:
    """PTX text -> {entry name: its text} (device functions stay with the entry they follow)."""
    matches = list(_PTX_ENTRY_RE.finditer(ptx))
    return {
        m.group(1): ptx[m.start() : matches[i + 1].start() if i + 1 < len(matches) else len(ptx)]
        for i, m in enumerate(matches)
    }


def ptx_mma_types(ptx: str) -> dict[str, int]:
    """Tensor-core operand types of the MMA instructions in PTX text: ``mma.sync...f32.tf32.tf32.f32`` -> tf32,
    ``tcgen05.mma...kind::tf32`` -> tf32 (the SASS of tcgen05 does not show the kind)."""
    counts: Counter[str] = Counter()
    for match in _PTX_MMA_RE.finditer(ptx):
        text = match.group(0)
        if text.startswith("tcgen05"):
            kind = re.search(r"kind::(\w+)", text)
            counts[_TCGEN05_KINDS.get(kind.group(1), kind.group(1)) if kind else "unknown"] += 1
            continue
        types = [t for t in text.split(".") if t in _PTX_TYPES]
        if text.startswith("wmma") and len(types) == 2:
            counts["fp16"] += 1  # wmma.mma.sync...f32.f32 names only D and C: fp16 inputs
        elif len(types) >= 2:
            counts[_PTX_TYPES[types[1]]] += 1  # [D, A, B, (C)]
        else:
            counts["unknown"] += 1
    return dict(counts)


# ------------------------------------------------------------------------------------------------ summaries


def _distinctive(arch: str, classes: Mapping[str, int]) -> dict[str, bool]:
    from kernelwright.hardware.spec import arch_spec

    try:
        wanted = arch_spec(arch).distinctive
    except InputError:
        return {}
    return {cls: classes.get(cls, 0) > 0 for cls in wanted}


def _max_launchable_threads(arch: str, registers: int) -> int | None:
    from kernelwright.hardware.spec import arch_spec

    try:
        spec = arch_spec(arch)
    except InputError:
        return None
    if registers <= 0:
        return spec.max_threads_per_block
    per_warp = -(-registers * spec.warp_size // spec.register_alloc_unit) * spec.register_alloc_unit
    warps = min(spec.max_threads_per_block // spec.warp_size, spec.max_registers_per_block // per_warp)
    return warps * spec.warp_size if warps > 0 else None


def occupancy_at(arch: str, threads: int | None, registers: int, shared: int) -> dict[str, Any] | None:
    from kernelwright.hardware.occupancy import occupancy

    if not threads:
        return None
    try:
        return occupancy(arch, threads_per_block=threads, registers_per_thread=registers,
                         shared_bytes_per_block=shared).to_json()
    except InputError as exc:
        log.info("no occupancy for %s: %s", arch, exc)
        return None


def _static_shared(function: sass.SassFunction, log_record: Any) -> int:
    """The kernel's own static shared memory. ptxas's ``smem`` is exact; ``cuobjdump -res-usage`` on sm_90 and
    later adds the 1 KiB the system reserves per block to any kernel that uses shared memory (checked with
    cuobjdump 13.1: 4096 B of ``__shared__`` reads SHARED:5120 on sm_90a/sm_100a/sm_120, 4096 on sm_80/sm_89),
    which the occupancy rules count separately."""
    from kernelwright.hardware.spec import arch_spec

    if log_record is not None and log_record.registers is not None:
        return log_record.shared_bytes or 0
    listed = function.resources.shared_bytes
    try:
        spec = arch_spec(function.arch)
    except InputError:
        return listed
    if spec.compute_capability and spec.compute_capability >= (9, 0):
        return max(listed - spec.reserved_shared_per_block_bytes, 0)
    return listed


def summarize_function(
    function: sass.SassFunction,
    *,
    origin: str,
    tool: str,
    ptxas_log: str = "",
    ptx: str = "",
    threads_per_block: int | None = None,
    dynamic_shared_bytes: int | None = None,
) -> KernelSummary:
    """A :class:`KernelSummary` for one disassembled function, with what else is known about it."""
    counts = function.opcode_counts()
    classes = sass.class_histogram(counts)
    mma_types: Counter[str] = Counter()
    load_bits: Counter[int] = Counter()
    store_bits: Counter[int] = Counter()
    for opcode, n in counts.items():
        kind = sass.mma_operand_type(opcode)
        if kind:
            mma_types[kind] += n
        cls = sass.classify(opcode)
        if cls in ("global_load", "global_store"):
            bits = sass.access_bits(opcode) or 32
            (load_bits if cls == "global_load" else store_bits)[bits] += n
    ptx_types: dict[str, int] = {}
    evidence: dict[str, int] = {}
    own_ptx = ""
    if ptx:
        entries = ptx_entries(ptx)
        own_ptx = entries.get(function.name, ptx if len(entries) <= 1 else "")
        ptx_types = ptx_mma_types(own_ptx)
        evidence = ptx_evidence(own_ptx)
    log_record, warnings = parse_ptxas_log(ptxas_log).for_function(function.name) if ptxas_log else (None, ())
    res = function.resources
    registers = res.registers or (log_record.registers if log_record and log_record.registers else 0)
    static_shared = _static_shared(function, log_record)
    shared = static_shared + (dynamic_shared_bytes or 0)
    if threads_per_block:
        threads, source = threads_per_block, "launch"
    elif function.max_threads:
        threads, source = function.max_threads, "launch_bounds"
    else:
        threads, source = _max_launchable_threads(function.arch, registers), "max_launchable"
    return KernelSummary(
        name=function.name,
        arch=function.arch,
        origin=origin,
        tool=tool,
        registers=registers,
        shared_bytes=shared,
        static_shared_bytes=static_shared,
        dynamic_shared_known=dynamic_shared_bytes is not None,
        stack_bytes=res.stack_bytes or (log_record.stack_bytes or 0 if log_record else 0),
        spill_store_bytes=log_record.spill_store_bytes if log_record else None,
        spill_load_bytes=log_record.spill_load_bytes if log_record else None,
        threads_per_block=threads,
        threads_source=source if threads else "",
        occupancy=occupancy_at(function.arch, threads, registers, shared),
        instruction_count=sum(counts.values()),
        histogram_by_class=classes,
        histogram_by_opcode=dict(counts.most_common()),
        mma_types=dict(mma_types),
        ptx_mma_types=ptx_types,
        ptx_available=bool(own_ptx),
        ptx_evidence=evidence,
        global_load_bits=dict(sorted(load_bits.items())),
        global_store_bits=dict(sorted(store_bits.items())),
        distinctive=_distinctive(function.arch, classes),
        ptxas_warnings=tuple(warnings),
    )


def analyze_cubin(
    cubin: bytes | Path,
    *,
    arch: str | None = None,
    name: str | None = None,
    ptxas_log: str = "",
    ptx: str = "",
    threads_per_block: int | None = None,
    dynamic_shared_bytes: int | None = None,
    origin: str = "cubin",
) -> list[KernelSummary]:
    """One :class:`KernelSummary` per kernel in a cubin (bytes or a path). ``name`` keeps only that kernel;
    ``ptxas_log``/``ptx`` add spill figures, C75xx warnings and the tcgen05 MMA kind; ``threads_per_block`` and
    ``dynamic_shared_bytes`` (a Triton kernel's ``metadata.shared``) make the occupancy exact."""
    if isinstance(cubin, (bytes, bytearray)):
        with tempfile.TemporaryDirectory(prefix="kw-cubin-") as tmp:
            path = Path(tmp) / "kernel.cubin"
            path.write_bytes(bytes(cubin))
            return analyze_cubin(path, arch=arch, name=name, ptxas_log=ptxas_log, ptx=ptx,
                                 threads_per_block=threads_per_block, dynamic_shared_bytes=dynamic_shared_bytes,
                                 origin=origin)
    disassembly = sass.disassemble(Path(cubin), arch=arch)
    functions = [f for f in disassembly.functions if name is None or f.name == name]
    if name is not None and not functions:
        known = ", ".join(f.name for f in disassembly.functions) or "none"
        raise InputError(f"no kernel named {name!r} in {Path(cubin).name}; kernels: {known}")
    return [
        summarize_function(f, origin=origin, tool=disassembly.tool, ptxas_log=ptxas_log, ptx=ptx,
                           threads_per_block=threads_per_block, dynamic_shared_bytes=dynamic_shared_bytes)
        for f in functions
    ]


_ORIGINS = {".cubin": "cubin", ".fatbin": "fatbin", ".so": "shared-object", ".o": "object", ".bin": "cubin"}


def analyze_binary(path: Path | str, *, arch: str | None = None, name: str | None = None) -> list[KernelSummary]:
    """Summaries of every kernel (for every SASS arch, or only ``arch``) in a cubin, fatbin, object file or shared
    object such as a ``torch.utils.cpp_extension`` build. Embedded PTX, when present, resolves tcgen05 kinds."""
    path = Path(path)
    origin = _ORIGINS.get(path.suffix, "shared-object" if ".so" in path.suffixes else "cubin")
    summaries = analyze_cubin(path, arch=arch, name=name, origin=origin)
    if any(s.histogram_by_class.get("tcgen05") for s in summaries):
        ptx = embedded_ptx(path)
        if ptx:
            summaries = analyze_cubin(path, arch=arch, name=name, origin=origin, ptx=ptx)
    if not summaries:
        log.warning("%s holds no SASS kernels%s", path, f" for {arch}" if arch else "")
    return summaries


def embedded_ptx(path: Path) -> str:
    """The PTX embedded in a fatbin or shared object (``cuobjdump -ptx``), or ``""``."""
    from kernelwright.inspect import tools

    try:
        result = tools.run_tool(tools.tools_for("cuobjdump")[0], ["-ptx", str(path)])
    except Exception as exc:  # PTX is optional evidence
        log.info("no embedded PTX from %s: %s", path, exc)
        return ""
    return result.stdout if result.returncode == 0 else ""


def analyze_artifact(artifact: CompiledArtifact) -> KernelSummary:
    """The summary of a Triton kernel compiled by :func:`kernelwright.inspect.triton_compile.compile_for_arch`."""
    [summary] = analyze_cubin(
        artifact.cubin,
        arch=artifact.arch,
        name=artifact.name,
        ptxas_log=artifact.ptxas_log,
        ptx=artifact.ptx,
        threads_per_block=artifact.num_warps * 32,
        dynamic_shared_bytes=artifact.shared_bytes,
        origin="triton",
    )
    return summary


def summaries_to_json(summaries: Sequence[KernelSummary]) -> list[dict[str, Any]]:
    return [s.to_json() for s in summaries]
