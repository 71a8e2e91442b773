"""SASS: disassembling cubins and shared objects, and classifying every instruction.

``disassemble(path)`` runs ``cuobjdump -sass`` and ``-res-usage`` (the copy that supports the file's arch) and returns
one :class:`SassFunction` per (arch, kernel). ``classify(opcode)`` names the instruction class of an opcode such as
``HGMMA.64x128x16.F32.BF16`` (``"wgmma"``) or ``LDG.E.128`` (``"global_load"``); ``mma_operand_type`` and
``access_bits`` extract the tensor-core operand type and the memory access width. Opcode forms were checked against
cuobjdump 12.8/13.1 output for sm_70 .. sm_120 (GPU_FACTS.md, "SASS opcodes that matter").
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright import signed
from kernelwright.errors import InputError, ToolchainError
from kernelwright.inspect import tools

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------ classification

# Instruction classes, in the order reports list them. Each is documented in docs/inspect.md.
CLASSES = (
    "mma",  # warp-level tensor-core MMA (mma.sync / wmma): HMMA, IMMA, DMMA, QMMA, BMMA, OMMA
    "wgmma",  # Hopper warpgroup MMA: HGMMA, QGMMA, IGMMA, BGMMA
    "warpgroup",  # WARPGROUP.ARRIVE / WARPGROUP.DEPBAR (wgmma fences)
    "tcgen05",  # Blackwell tensor-core MMA: UTCHMMA, UTCQMMA, UTCIMMA, UTCOMMA
    "tmem",  # Blackwell tensor memory: LDTM, STTM, UTCCP, UTCBAR, UTCATOMSWS (alloc), UVIRTCOUNT (dealloc)
    "tma",  # tensor memory accelerator / bulk copies: UTMALDG, UTMASTG, UTMAPF, UBLKCP, ...
    "mbarrier",  # SYNCS.* (mbarrier arrive / wait, transaction counts)
    "cp_async",  # LDGSTS (cp.async), LDGDEPBAR, ARRIVES.LDGSTSBAR
    "global_load",  # LDG
    "global_store",  # STG
    "atomic",  # ATOM, ATOMG, ATOMS, RED, REDG, REDUX on memory
    "generic_memory",  # LD / ST through the generic address space
    "shared_load",  # LDS
    "shared_store",  # STS
    "ldmatrix",  # LDSM (ldmatrix)
    "stmatrix",  # STSM (stmatrix)
    "local",  # LDL / STL: register spills and local arrays
    "constant",  # LDC, ULDC, LDCU
    "texture",  # TEX, TLD, SULD, SUST, ...
    "barrier",  # BAR, DEPBAR, MEMBAR, FENCE, ERRBAR, CCTL, cluster barriers
    "warp",  # SHFL, VOTE, REDUX, MATCH, ELECT, WARPSYNC
    "setmaxnreg",  # USETMAXREG (setmaxnreg)
    "dpx",  # VIMNMX, VIMNMX3, VIADDMNMX, VIBMNMX (Hopper DPX)
    "sfu",  # MUFU: special functions (exp2, rcp, rsqrt, sin, ...)
    "convert",  # F2F, F2I, I2F, F2FP, I2FP, FRND, ...
    "fp64",  # DADD, DMUL, DFMA, ...
    "fp32",  # FADD, FMUL, FFMA, FMNMX, FSETP, FSEL, FADD2/FFMA2 (sm_100), ...
    "fp16",  # HADD2, HMUL2, HFMA2 (HFMA2.MMA, a constant-materialising idiom, counts as a move), ...
    "int",  # IADD3, IMAD, LOP3, SHF, LEA, ISETP, PRMT, ...
    "move",  # MOV, S2R, CS2R, R2UR, SEL, predicates
    "control",  # BRA, EXIT, CALL, RET, BSSY, BSYNC, NOP, ...
    "other",
)
TENSOR_CLASSES = ("mma", "wgmma", "tcgen05")

_EXACT: dict[str, str] = {}
for _cls, _ops in {
    "mma": "HMMA IMMA DMMA QMMA BMMA OMMA",
    "wgmma": "HGMMA QGMMA IGMMA BGMMA",
    "warpgroup": "WARPGROUP",
    "tcgen05": "UTCHMMA UTCQMMA UTCIMMA UTCOMMA UTCMMA UTCBMMA",
    "tmem": "LDTM STTM UTCCP UTCBAR UTCATOMSWS UTCSHIFT UVIRTCOUNT",
    "tma": "UTMALDG UTMASTG UTMAPF UTMAREDG UTMACCTL UTMACMDFLUSH UBLKCP UBLKRED UBLKPF",
    "mbarrier": "SYNCS",
    "cp_async": "LDGSTS LDGDEPBAR",
    "global_load": "LDG",
    "global_store": "STG",
    "atomic": "ATOM ATOMG ATOMS RED REDG REDAS",
    "generic_memory": "LD ST",
    "shared_load": "LDS",
    "shared_store": "STS",
    "ldmatrix": "LDSM",
    "stmatrix": "STSM",
    "local": "LDL STL",
    "constant": "LDC ULDC LDCU",
    "texture": "TEX TLD TLD4 TXQ TMML TXD SULD SUST SUATOM SURED",
    "barrier": "BAR DEPBAR MEMBAR FENCE ERRBAR CCTL CCTLL UCGABAR CGAERRBAR",
    "warp": "SHFL VOTE VOTEU REDUX MATCH ELECT WARPSYNC",
    "setmaxnreg": "USETMAXREG",
    "dpx": "VIMNMX VIMNMX3 VIADDMNMX VIBMNMX",
    "sfu": "MUFU",
    "convert": "F2F F2I I2F F2FP I2FP F2IP FRND I2I I2IP",
    "fp64": "DADD DMUL DFMA DSETP DMNMX DSET",
    "fp32": "FADD FMUL FFMA FMNMX FMNMX3 FSETP FSET FSEL FCHK FSWZADD FADD32I FMUL32I FFMA32I FADD2 FMUL2 FFMA2 FHADD",
    "fp16": "HADD2 HMUL2 HFMA2 HMNMX2 HSETP2 HSET2 HADD2_32I HMUL2_32I HFMA2_32I",
    "int": "IADD3 IADD IADD32I IMAD IMAD32I IMUL IMUL32I IMNMX ISETP ISET LOP3 LOP LOP32I SHF SHL SHR LEA POPC FLO "
    "BREV SGXT PRMT IABS BMSK BFE BFI VIADD IDP IDP4A VABSDIFF VABSDIFF4 IMNMX3 IADD2 I2IP",
    "move": "MOV MOV32I S2R S2UR CS2R R2UR R2P P2R PLOP3 PSETP SEL SHFL_SEL P2UR UR2R BMOV B2R R2B",
    "control": "BRA BRX JMP JMX CALL RET EXIT BSSY BSYNC BREAK NOP YIELD KILL BPT RTT ACQBULK ENDCOLLECTIVE "
    "WARPGROUP_SYNC PMTRIG NANOSLEEP ACQSHMINIT",
}.items():
    for _op in _ops.split():
        _EXACT[_op] = _cls


def base_opcode(opcode: str) -> str:
    return opcode.split(".", 1)[0]


def classify(opcode: str) -> str:
    """The instruction class (one of :data:`CLASSES`) of a SASS opcode with its modifiers."""
    base = base_opcode(opcode)
    if opcode.startswith("HFMA2.MMA"):
        # ptxas's idiom for materialising a constant (HFMA2.MMA Rd, -RZ, RZ, imm, imm) on an idle pipe; it shows up
        # in fp32-only kernels, so counting it as fp16 arithmetic would mislead.
        return "move"
    cls = _EXACT.get(base)
    if cls is not None:
        return cls
    # uniform-datapath forms (UIADD3, ULOP3, UMOV, USEL, UISETP ...) are the scalar twins of the plain ones
    if base.startswith("U") and len(base) > 2:
        twin = _EXACT.get(base[1:])
        if twin in ("int", "move", "constant", "fp32", "control", "warp", "barrier", "convert"):
            return twin
    if base.startswith("UTC") and base.endswith("MMA"):
        return "tcgen05"
    return "other"


_MMA_TYPES = {
    "BF16": "bf16",
    "TF32": "tf32",
    "E4M3": "fp8",
    "E5M2": "fp8",
    "E2M1": "fp4",
    "E3M2": "fp6",
    "E2M3": "fp6",
    "S8": "int8",
    "U8": "int8",
    "S4": "int4",
    "U4": "int4",
}


def mma_operand_type(opcode: str) -> str | None:
    """The input (A/B) operand type of a tensor-core MMA opcode, or None for other opcodes.

    ``HMMA.16816.F32`` -> ``"fp16"`` (no type suffix means FP16 inputs), ``HMMA.16816.F32.BF16`` -> ``"bf16"``,
    ``HMMA.1688.F32.TF32`` -> ``"tf32"``, ``QGMMA...E4M3`` -> ``"fp8"``, ``DMMA`` -> ``"fp64"``. Blackwell's UTCHMMA
    covers fp16, bf16 and tf32 alike (the kind is in a descriptor register, not the opcode): ``"f16|bf16|tf32"``.
    """
    base = base_opcode(opcode)
    cls = classify(opcode)
    if cls not in TENSOR_CLASSES:
        return None
    tokens = opcode.split(".")[1:]
    for token in tokens:
        if token in _MMA_TYPES:
            return _MMA_TYPES[token]
    return {
        "HMMA": "fp16",
        "HGMMA": "fp16",
        "DMMA": "fp64",
        "IMMA": "int8",
        "IGMMA": "int8",
        "BMMA": "b1",
        "BGMMA": "b1",
        "QMMA": "fp8",
        "QGMMA": "fp8",
        "OMMA": "fp4",
        "UTCHMMA": "f16|bf16|tf32",
        "UTCQMMA": "fp8|fp6|fp4",
        "UTCIMMA": "int8",
        "UTCOMMA": "fp4",
    }.get(base, "unknown")


_WIDTH_RE = re.compile(r"^[US]?(8|16|32|64|128|256)$")


def access_bits(opcode: str) -> int | None:
    """Bits per thread moved by a memory opcode (``LDG.E.128`` -> 128, ``LDG.E`` -> 32, ``LDG.E.U16`` -> 16), or
    None for non-memory opcodes. Cache-hint tokens such as ``LTC128B`` are not widths."""
    if classify(opcode) not in (
        "global_load", "global_store", "shared_load", "shared_store", "local", "generic_memory", "cp_async",
        "constant", "atomic",
    ):
        return None
    for token in reversed(opcode.split(".")[1:]):
        match = _WIDTH_RE.match(token)
        if match:
            return int(match.group(1))
    return 32


# ------------------------------------------------------------------------------------------------ listings


@dataclass(frozen=True, kw_only=True)
class Instruction:
    offset: int
    opcode: str
    operands: str
    predicate: str = ""


@dataclass(frozen=True, kw_only=True)
class Resources:
    """``cuobjdump -res-usage`` figures for one function."""

    registers: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0  # static shared memory only
    local_bytes: int = 0
    constant_bytes: int = 0


@dataclass(frozen=True, kw_only=True)
class SassFunction:
    name: str
    arch: str
    instructions: tuple[Instruction, ...]
    resources: Resources = field(default_factory=Resources)
    max_threads: int | None = None  # declared block size (__launch_bounds__ / .reqntid / .maxntid), if any

    def opcode_counts(self) -> Counter[str]:
        return Counter(i.opcode for i in self.instructions)


@dataclass(frozen=True, kw_only=True)
class Disassembly:
    functions: tuple[SassFunction, ...]
    tool: str  # e.g. "cuobjdump 12.8"
    archs: tuple[str, ...]  # every arch with SASS in the file
    ptx_archs: tuple[str, ...] = ()  # archs present only as PTX (JIT-compiled by the driver)


_CODE_FOR_RE = re.compile(r"^\s*code for (sm_\w+)", re.M)
_ARCH_LINE_RE = re.compile(r"^arch = (sm_\w+)")
_FUNCTION_RE = re.compile(r"^\s*Function : (\S+)")
_INSTR_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Za-z][A-Za-z0-9_.]*)\s*([^;]*);")
_RES_FUNC_RE = re.compile(r"^\s*Function (\S+):\s*$")
_RES_VALUES_RE = re.compile(r"(REG|STACK|SHARED|LOCAL|CONSTANT\[0\]):(\d+)")


def parse_sass_listing(text: str) -> dict[tuple[str, str], list[Instruction]]:
    """``cuobjdump -sass`` text -> {(arch, function): instructions}, in listing order."""
    result: dict[tuple[str, str], list[Instruction]] = {}
    arch = "unknown"
    header_arch = ""  # a fatbin's "arch = sm_90a" line: CUDA 12 tools print "code for sm_90" for sm_90a code
    current: list[Instruction] | None = None
    for line in text.splitlines():
        match = _ARCH_LINE_RE.match(line.strip())
        if match:
            header_arch = match.group(1)
            continue
        match = _CODE_FOR_RE.match(line)
        if match:
            arch, current = match.group(1), None
            if header_arch and _same_arch(header_arch, arch):
                arch = header_arch
            continue
        match = _FUNCTION_RE.match(line)
        if match:
            current = result.setdefault((arch, match.group(1)), [])
            continue
        if current is None:
            continue
        match = _INSTR_RE.match(line)
        if match:
            current.append(Instruction(
                offset=int(match.group(1), 16),
                predicate=(match.group(2) or "").strip(),
                opcode=match.group(3),
                operands=match.group(4).strip(),
            ))
    return {key: _strip_padding(instrs) for key, instrs in result.items()}


def _strip_padding(instrs: list[Instruction]) -> list[Instruction]:
    """Drop the alignment padding ptxas appends after the code: trailing NOPs and the ``BRA`` to itself."""
    end = len(instrs)
    while end and instrs[end - 1].opcode == "NOP":
        end -= 1
    if end and instrs[end - 1].opcode == "BRA" and not instrs[end - 1].predicate:
        target = instrs[end - 1].operands.split()[0] if instrs[end - 1].operands else ""
        if target.startswith("0x") and int(target, 16) == instrs[end - 1].offset:
            end -= 1
    return instrs[:end]


def parse_res_usage(text: str) -> dict[tuple[str, str], Resources]:
    """``cuobjdump -res-usage`` text -> {(arch, function): Resources}. Cubins without a fatbin header get arch
    ``"unknown"`` (the caller knows the arch from the SASS listing)."""
    result: dict[tuple[str, str], Resources] = {}
    arch = "unknown"
    function: str | None = None
    for line in text.splitlines():
        match = _ARCH_LINE_RE.match(line.strip())
        if match:
            arch = match.group(1)
            continue
        match = _RES_FUNC_RE.match(line)
        if match:
            function = match.group(1)
            continue
        if function and "REG:" in line:
            values = dict(_RES_VALUES_RE.findall(line))
            result[(arch, function)] = Resources(
                registers=int(values.get("REG", 0)),
                stack_bytes=int(values.get("STACK", 0)),
                shared_bytes=int(values.get("SHARED", 0)),
                local_bytes=int(values.get("LOCAL", 0)),
                constant_bytes=int(values.get("CONSTANT[0]", 0)),
            )
            function = None
    return result


def _fatbin_ptx_archs(text: str) -> tuple[str, ...]:
    archs: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Fatbin ptx code"):
            for follow in lines[i + 1 : i + 4]:
                match = _ARCH_LINE_RE.match(follow.strip())
                if match:
                    archs.append(match.group(1))
                    break
    return tuple(archs)


_ELF_HEADER_RE = re.compile(r"(?i)^64-?bit elf:.*?\bsm=(\d+[af]?)")
_NV_INFO_RE = re.compile(r"^\.nv\.info\.(\S+)")
_MAX_THREADS_RE = re.compile(r"Attribute:\s+EIATTR_(MAX_THREADS|REQNTID)")
_VALUE_RE = re.compile(r"Value:\s+((?:0x[0-9a-f]+\s*){3})")


@dataclass(frozen=True, kw_only=True)
class ElfInfo:
    archs: tuple[str, ...]  # every SASS arch in the file, e.g. ("sm_80", "sm_90a")
    max_threads: Mapping[tuple[str, str], int]  # (arch, function) -> threads from __launch_bounds__ / reqntid


def parse_elf_dump(text: str) -> ElfInfo:
    """``cuobjdump -elf`` text -> the archs of its ELF images and each function's declared block size."""
    archs: list[str] = []
    max_threads: dict[tuple[str, str], int] = {}
    arch = "unknown"
    section: str | None = None
    pending = False
    for line in text.splitlines():
        match = _ELF_HEADER_RE.match(line.strip())
        if match:
            arch = f"sm_{match.group(1)}"
            archs.append(arch)
            section = None
            continue
        match = _NV_INFO_RE.match(line)
        if match:
            section, pending = match.group(1), False
            continue
        if line.startswith("."):
            section, pending = None, False
            continue
        if section is None:
            continue
        if _MAX_THREADS_RE.search(line):
            pending = True
            continue
        if pending:
            match = _VALUE_RE.search(line)
            if match:
                x, y, z = (int(v, 16) for v in match.group(1).split())
                max_threads[(arch, section)] = x * y * z
                pending = False
    return ElfInfo(archs=tuple(dict.fromkeys(archs)), max_threads=max_threads)


_DISASSEMBLY_CACHE: dict[str, Disassembly] = {}
_CACHE_VERSION = 1  # of the cache entries' form (and of the parsers: bump when what they produce changes)
# A verify's working folder (tempfile.mkdtemp: the prefix and 8 random characters): Triton's line info names the
# candidate's file, which lies there, so the same kernel's cubin differs from one verify to the next in that name
# alone (measured: two verifies of one softmax, 12,824-byte cubins, one differing string).
_VERIFY_FOLDER = re.compile(rb"kernelwright-verify-[a-z0-9_]{8}")


def content_key(data: bytes) -> str:
    """A binary's cache key: the SHA-256 of its bytes with every verify folder's random name blanked."""
    return hashlib.sha256(_VERIFY_FOLDER.sub(b"kernelwright-verify-________", data)).hexdigest()


def disassemble(path: Path, *, arch: str | None = None) -> Disassembly:
    """Disassemble a cubin, fatbin, object or shared object with a cuobjdump that supports its arch.

    The newest cuobjdump reads the ELF headers (any arch) to learn the archs and declared block sizes; the listing
    then comes from the newest copy that supports the requested arch (or, without one, the file's single arch).
    A tool that refuses anyway (CUDA 13 prints "SM70 is deprecated" and exits 0) is skipped for the next.

    Results are cached by content (:func:`content_key`, the arch and the tools), in this process and, signed, in
    kernelwright's cache: ``cuobjdump -sass`` takes 0.5-0.9 s a Triton cubin on 2 cores, about a third of a CPU
    verify of a small kernel, and the suite, a search or a ``bench --resume`` disassembles the same kernels again."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path} does not exist or is not a file")
    key = "|".join([content_key(path.read_bytes()), arch or "", *(t.describe() for t in tools.tools_for("cuobjdump")),
                    f"v{_CACHE_VERSION}"])
    if key in _DISASSEMBLY_CACHE:
        return _DISASSEMBLY_CACHE[key]
    entry = _cache_path(key)
    body = signed.read(entry, key)
    result = _disassembly_from_json(body) if body is not None else None
    if result is None:
        result = _disassemble(path, arch)
        if signed.write(entry, key, _disassembly_to_json(result)):
            _prune(entry.parent)
    _DISASSEMBLY_CACHE[key] = result
    return result


_CACHE_ENTRIES = 4000  # a search's candidates are each new; tens of kB an entry keeps the folder near 100 MB


def _prune(folder: Path) -> None:
    """Drop the least recently written entries beyond :data:`_CACHE_ENTRIES`."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.stat().st_mtime)
    except OSError:
        return
    for stale in entries[:max(0, len(entries) - _CACHE_ENTRIES)]:
        with contextlib.suppress(OSError):
            os.unlink(stale.path)


def _cache_path(key: str) -> Path:
    from kernelwright.config import config

    return Path(config.cache_dir) / "sass" / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def _disassembly_to_json(d: Disassembly) -> dict[str, Any]:
    return {"tool": d.tool, "archs": list(d.archs), "ptx_archs": list(d.ptx_archs), "functions": [
        {"name": f.name, "arch": f.arch, "max_threads": f.max_threads, "resources": vars(f.resources),
         "instructions": [[i.offset, i.opcode, i.operands, i.predicate] for i in f.instructions]}
        for f in d.functions]}


def _disassembly_from_json(body: Mapping[str, Any]) -> Disassembly | None:
    """What :func:`_disassembly_to_json` wrote, or None for an entry of another form."""
    try:
        return Disassembly(
            tool=str(body["tool"]), archs=tuple(map(str, body["archs"])), ptx_archs=tuple(map(str, body["ptx_archs"])),
            functions=tuple(
                SassFunction(name=str(f["name"]), arch=str(f["arch"]),
                             max_threads=None if f["max_threads"] is None else int(f["max_threads"]),
                             resources=Resources(**{k: int(v) for k, v in f["resources"].items()}),
                             instructions=tuple(Instruction(offset=int(o), opcode=str(op), operands=str(args),
                                                            predicate=str(pred))
                                                for o, op, args, pred in f["instructions"]))
                for f in body["functions"]))
    except (KeyError, TypeError, ValueError) as exc:
        log.info("a disassembly cache entry of another form (%s): disassembled again", exc)
        return None


def _disassemble(path: Path, arch: str | None) -> Disassembly:
    newest = tools.tools_for("cuobjdump")[0]
    elf = parse_elf_dump(tools.run_tool(newest, ["-elf", str(path)]).stdout)
    if arch is not None and elf.archs and not any(_same_arch(arch, a) for a in elf.archs):
        raise InputError(f"{path.name} has no SASS for {arch}; it holds {', '.join(elf.archs)}")
    if len(set(elf.archs)) > 1:
        # Several archs (an extension built for a list of archs): one tool rarely reads them all (CUDA 13 stops at
        # an sm_70 image), so each image is taken out and read by a tool that knows its arch.
        return _disassemble_images(path, arch, newest)
    target = arch or (elf.archs[0] if len(elf.archs) == 1 else None)
    failures: list[str] = []
    seen_archs: tuple[str, ...] = elf.archs
    for tool in tools.tools_for("cuobjdump", target):
        listing = tools.run_tool(tool, ["-sass", str(path)])
        output = listing.stdout + "\n" + listing.stderr
        functions = parse_sass_listing(listing.stdout)
        seen_archs = tuple(dict.fromkeys(_CODE_FOR_RE.findall(listing.stdout))) or seen_archs
        # a refusing tool may still exit 0 and print the "code for sm_70" header without any function
        refused = tools.refusal(output) if not any(functions.values()) else None
        if listing.returncode != 0 or refused or (seen_archs and not any(functions.values())):
            failures.append(f"{tool.describe()}: {refused or listing.stderr.strip()[:200] or 'no SASS'}")
            continue
        usage = tools.run_tool(tool, ["-res-usage", str(path)])
        resources = parse_res_usage(usage.stdout)
        named = [(_arch_label(fn_arch, arch, elf.archs), name, fn_arch, instrs)
                 for (fn_arch, name), instrs in functions.items() if arch is None or _same_arch(arch, fn_arch)]
        result = Disassembly(
            functions=tuple(
                SassFunction(
                    name=name,
                    arch=label,
                    instructions=tuple(instrs),
                    resources=_lookup_same_arch(resources, label, name) or Resources(),
                    max_threads=_lookup_same_arch(elf.max_threads, label, name),
                )
                for label, name, _listed, instrs in named
            ),
            tool=f"cuobjdump {tool.version_text}",
            archs=seen_archs,
            ptx_archs=_fatbin_ptx_archs(listing.stdout),
        )
        return result
    if not failures and not seen_archs:
        return Disassembly(functions=(), tool="cuobjdump", archs=())
    arch_text = target or (seen_archs[0] if seen_archs else "this file's arch")
    raise ToolchainError(
        f"cannot disassemble {path.name} ({arch_text}): {'; '.join(failures)}; "
        f"{arch_text} needs {tools.needed_versions(arch_text)}"
    )


def _disassemble_images(path: Path, arch: str | None, newest: tools.Tool) -> Disassembly:
    """:func:`disassemble` of every single-arch ELF image in ``path`` (or those of ``arch``), merged. Images no
    available tool can read are left out with a warning, unless nothing is left."""
    functions: list[SassFunction] = []
    archs: list[str] = []
    skipped: list[str] = []
    used: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kw-elf-") as tmp:
        extracted = subprocess.run([str(newest.path), "-xelf", "all", str(path.resolve())], cwd=tmp,
                                   capture_output=True, text=True, timeout=300)
        images = sorted(Path(tmp).glob("*.cubin"))
        if extracted.returncode != 0 or not images:
            raise ToolchainError(f"cannot take the ELF images out of {path.name}: "
                                 f"{(extracted.stderr or extracted.stdout).strip()[:200]}")
        for image in images:
            image_arch = _IMAGE_ARCH_RE.search(image.name)
            label = image_arch.group(1) if image_arch else None
            if arch is not None and label is not None and not _same_arch(arch, label):
                continue
            try:
                part = disassemble(image, arch=arch or label)
            except ToolchainError as exc:
                skipped.append(str(exc))
                continue
            functions += part.functions
            archs += [a for a in part.archs if a not in archs]
            used.append(part.tool)
    if not functions and skipped:
        raise ToolchainError("; ".join(skipped))
    for reason in skipped:
        log.warning("%s: an image was left out: %s", path.name, reason)
    return Disassembly(functions=tuple(functions), tool=", ".join(dict.fromkeys(used)) or "cuobjdump",
                       archs=tuple(archs))


_IMAGE_ARCH_RE = re.compile(r"\.(sm_\w+?)\.cubin$")


def _arch_label(listed: str, requested: str | None, elf_archs: tuple[str, ...]) -> str:
    """The most specific name for a listing's arch: the requested one, else the ELF header's (``sm_90a``; CUDA 12
    tools print ``sm_90`` for arch-specific code), else the listing's."""
    if requested and _same_arch(requested, listed):
        return requested
    return next((a for a in elf_archs if _same_arch(a, listed) and len(a) > len(listed)), listed)


def _lookup_same_arch(table: Mapping[tuple[str, str], Any], arch: str, name: str) -> Any:
    for key in ((arch, name), ("unknown", name)):
        if key in table:
            return table[key]
    return next((v for (a, n), v in table.items() if n == name and _same_arch(a, arch)), None)


def _same_arch(a: str, b: str) -> bool:
    """sm_90a and sm_90 name the same SASS (the listing may print either)."""
    return a.rstrip("af") == b.rstrip("af")


def disassemble_bytes(cubin: bytes, *, arch: str | None = None) -> Disassembly:
    """:func:`disassemble` for an in-memory cubin."""
    with tempfile.TemporaryDirectory(prefix="kw-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return disassemble(path, arch=arch)


def class_histogram(counts: Mapping[str, int]) -> dict[str, int]:
    """Opcode counts -> class counts, in :data:`CLASSES` order, zero classes left out."""
    totals: Counter[str] = Counter()
    for opcode, n in counts.items():
        totals[classify(opcode)] += n
    return {cls: totals[cls] for cls in CLASSES if totals[cls]}
