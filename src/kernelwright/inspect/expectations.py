"""What the SASS should show for a problem on an arch, and findings where it does not.

    findings = evaluate(summaries, traits, "sm_90a")

Codes (each Finding carries a one-line message and the opcode counts as evidence in ``details``):

==========================  ========  ==========================================================================
code                        severity  when
==========================  ========  ==========================================================================
``tf32-in-fp32``            error     an fp32 problem's MMAs take TF32 operands (note with ``allow_tf32``, or when
                                      the PTX shows split-precision 3xTF32 emulation; warning without PTX, which
                                      is needed to tell the two apart)
``fp16-in-fp32``            error     an fp32 problem's MMAs take fp16 or bf16 operands (note with
                                      ``allow_reduced_precision``)
``low-precision-mma``       error     MMA operands below the problem's precision otherwise (fp8/int8 in a 16-bit
                                      problem, bf16 in an fp16 one, anything below fp64 in an fp64 problem; note
                                      when allowed)
``mma-type-mismatch``       warning   MMA operands wider than the problem's (16-bit MMAs in an fp8 problem, fp16
                                      in a bf16 one): correct, but the problem's own tensor-core path never ran
``mma-type-unknown``        warning   Blackwell tcgen05 MMAs in an fp32 problem without PTX to show their kind
``no-tensor-core``          warning   a matmul/conv/attention-dominant problem whose dtype the arch's tensor cores
                                      take, with no tensor-core instruction in any kernel
``legacy-mma-on-hopper``    warning   sm_90a kernels doing warp-level HMMA and no warpgroup HGMMA
``legacy-mma-on-blackwell`` warning   sm_100a kernels doing HMMA/HGMMA and no tcgen05 MMA
``spills``                  warning   ptxas reports spill stores or loads
``local-memory``            note      LDL/STL without a ptxas log: spills or a local array, SASS cannot tell
``scalar-global-access``    warning   a memory-bound problem's kernel moves global memory only 32 bits (or less)
                                      per thread per instruction, with no 64/128-bit, cp.async or TMA access
``low-occupancy``           warning   below 25 % of the SM's warp slots in a memory-bound problem (note otherwise)
``cannot-launch``           error     the launch configuration exceeds the arch's limits
``wgmma-serialized``        warning   ptxas: "wgmma.mma_async instructions are serialized" (C7510-C7515, C7520)
``wgmma-wait-injected``     note      ptxas injected warpgroup waits/arrives around wgmma (C7517, C7519)
``setmaxnreg-ignored``      note      ptxas C7508: setmaxnreg ignored
==========================  ========  ==========================================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kernelwright.errors import InputError
from kernelwright.inspect.analysis import KernelSummary
from kernelwright.records import Finding, ProblemTraits, Severity

TENSOR_DOMINANT = ("matmul", "conv", "attention")
LOW_OCCUPANCY = 0.25

# bits of mantissa precision, to order operand types; "f16|bf16" style entries take their weakest member
_PRECISION = {
    "fp64": 52, "fp32": 23, "tf32": 10, "fp16": 10, "bf16": 7, "fp8": 3, "fp6": 2, "fp4": 1,
    "int32": 31, "int8": 7, "int4": 3, "b1": 0,
}

_DTYPE_ALIASES = {
    "float64": "fp64", "double": "fp64", "fp64": "fp64",
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8", "fp8": "fp8",
    "int8": "int8", "uint8": "int8", "int32": "int32",
}


def normalize_dtype(dtype: str | None) -> str | None:
    """``"torch.float32"``, ``"float32"``, ``"fp32"`` -> ``"fp32"``; None for unknown."""
    if not dtype:
        return None
    return _DTYPE_ALIASES.get(dtype.lower().removeprefix("torch."))


_MEMBER_ALIASES = {"f16": "fp16", "f32": "fp32", "f64": "fp64", "e4m3": "fp8", "e5m2": "fp8"}


def _weakest(kind: str) -> str:
    members = [m for m in kind.split("|") if m in _PRECISION]
    return min(members, key=_PRECISION.__getitem__) if members else kind


def _tensor_core_capable(arch: str, dtype: str) -> bool:
    """Whether ``arch``'s tensor cores take ``dtype`` operands (the natural choice for a problem in ``dtype``)."""
    from kernelwright.hardware.spec import arch_spec

    try:
        spec = arch_spec(arch)
    except InputError:
        return False
    features = spec.features
    if "mma.sync" not in features and "mfma" not in features:
        return False
    needs = {"fp16": None, "bf16": "bf16", "fp8": "fp8", "int8": "int8-mma", "fp64": "fp64-mma"}
    if dtype not in needs:
        return False
    feature = needs[dtype]
    return feature is None or feature in features


def _family(arch: str) -> str:
    from kernelwright.hardware.spec import arch_spec

    try:
        return arch_spec(arch).family
    except InputError:
        return ""


def _kernel_evidence(kernel: KernelSummary, classes: Sequence[str] = ()) -> dict[str, Any]:
    evidence: dict[str, Any] = {"kernel": kernel.name, "arch": kernel.arch}
    if classes:
        evidence["classes"] = {c: kernel.histogram_by_class.get(c, 0) for c in classes}
    return evidence


def _opcodes(kernel: KernelSummary, prefixes: Sequence[str]) -> dict[str, int]:
    return {op: n for op, n in kernel.histogram_by_opcode.items() if op.split(".")[0] in prefixes}


def evaluate(kernels: Sequence[KernelSummary], traits: ProblemTraits, arch: str) -> list[Finding]:
    """Findings for the kernels a candidate launched (or compiled), given what the problem computes and the arch
    they target. Per-kernel findings name the kernel; an empty ``kernels`` gives no findings."""
    findings: list[Finding] = []
    if not kernels:
        return findings
    dtype = normalize_dtype(traits.compute_dtype)
    for kernel in kernels:
        findings += _precision_findings(kernel, traits, dtype)
        findings += _resource_findings(kernel, traits)
        findings += _ptxas_findings(kernel)
    findings += _tensor_core_findings(kernels, traits, dtype, arch)
    return findings


def precision_findings(kernel: KernelSummary, traits: ProblemTraits) -> list[Finding]:
    """One kernel's precision findings alone (``tf32-in-fp32``, ``low-precision-mma``): what its MMAs' operand types
    say against the problem's precision (the verifier's executed evidence asks it of the kernels whose MMAs ran)."""
    return _precision_findings(kernel, traits, normalize_dtype(traits.compute_dtype))


# ------------------------------------------------------------------------------------------------ precision


def _precision_findings(kernel: KernelSummary, traits: ProblemTraits, dtype: str | None) -> list[Finding]:
    if dtype is None or not kernel.mma_types:
        return []
    findings: list[Finding] = []
    sass_types = dict(kernel.mma_types)
    resolved = dict(sass_types)
    # Blackwell's UTCHMMA hides the kind; the PTX (when we have it) names it
    ambiguous = {k: n for k, n in sass_types.items() if "|" in k}
    if ambiguous and kernel.ptx_mma_types:
        for key in ambiguous:
            resolved.pop(key)
        for kind, n in kernel.ptx_mma_types.items():
            resolved[kind] = resolved.get(kind, 0) + n
    details_base = {
        **_kernel_evidence(kernel),
        "mma_types": sass_types,
        "ptx_mma_types": dict(kernel.ptx_mma_types),
        "mma_opcodes": _opcodes(kernel, ("HMMA", "IMMA", "DMMA", "QMMA", "HGMMA", "QGMMA", "IGMMA", "UTCHMMA",
                                         "UTCQMMA", "UTCIMMA", "UTCOMMA")),
    }
    problem_bits = _PRECISION.get(dtype)
    if problem_bits is None:
        return []
    for kind, count in resolved.items():
        if "|" in kind:
            members = {_MEMBER_ALIASES.get(m, m) for m in kind.split("|")}
            if dtype == "fp32" and members and members <= {"fp16", "bf16"}:
                # tcgen05's kind::f16 is f16 or bf16: either way 16-bit operands in an fp32 problem
                findings.append(_half_in_fp32(kernel, traits, count, "/".join(sorted(members)), details_base))
                continue
            if dtype == "fp32" and members & {"tf32", "fp16", "bf16"}:
                findings.append(Finding(
                    code="mma-type-unknown",
                    severity=Severity.WARNING,
                    message=f"{kernel.name}: {count} tcgen05 MMAs whose operand kind ({kind}) the SASS does not show; "
                    "inspect with the PTX to rule out TF32/half precision in this fp32 problem",
                    details=details_base,
                ))
            continue
        kind_bits = _PRECISION.get(kind)
        if kind_bits is None or kind == dtype:
            continue
        if kind_bits >= problem_bits:
            # Wider (or as wide) operands than the problem's: correct, but not the precision the problem claims —
            # an fp8 problem on 16-bit MMAs never ran the fp8 tensor cores (integrity #22, "or the reverse").
            findings.append(Finding(
                code="mma-type-mismatch",
                severity=Severity.WARNING,
                message=f"{kernel.name}: {dtype} problem computed with {count} {kind} tensor-core MMAs; its "
                f"speed is not {dtype}'s",
                details={**details_base, "operand_type": kind},
            ))
            continue
        if dtype == "fp32" and kind == "tf32":
            findings.append(_tf32_finding(kernel, traits, count, details_base))
        elif dtype == "fp32" and kind in ("fp16", "bf16"):
            findings.append(_half_in_fp32(kernel, traits, count, kind, details_base))
        else:  # fp16 on bf16 MMAs included: 7 bits of mantissa for 10 (integrity #22)
            allowed = traits.policy.allow_reduced_precision
            findings.append(Finding(
                code="low-precision-mma",
                severity=Severity.NOTE if allowed else Severity.ERROR,
                message=f"{kernel.name}: {dtype} problem computed with {count} {kind} tensor-core MMAs",
                details={**details_base, "operand_type": kind},
            ))
    return findings


def _half_in_fp32(kernel: KernelSummary, traits: ProblemTraits, count: int, kind: str,
                  details: Mapping[str, Any]) -> Finding:
    allowed = traits.policy.allow_reduced_precision
    return Finding(
        code="fp16-in-fp32",
        severity=Severity.NOTE if allowed else Severity.ERROR,
        message=f"{kernel.name}: fp32 problem computed with {count} {kind} tensor-core MMAs"
        + (" (reduced precision allowed)" if allowed else "; operands are rounded to 16 bits"),
        details={**details, "operand_type": kind},
    )


def _tf32_finding(kernel: KernelSummary, traits: ProblemTraits, count: int, details: Mapping[str, Any]) -> Finding:
    evidence = kernel.ptx_evidence
    split = evidence.get("cvt_tf32", 0) > 0 and evidence.get("sub_f32", 0) > 0
    details = {**details, "operand_type": "tf32", "ptx_evidence": dict(evidence)}
    if traits.policy.allow_tf32:
        return Finding(code="tf32-in-fp32", severity=Severity.NOTE, details=details,
                       message=f"{kernel.name}: {count} TF32 tensor-core MMAs in an fp32 problem (TF32 allowed)")
    if split:
        return Finding(
            code="tf32-in-fp32", severity=Severity.NOTE, details=details,
            message=f"{kernel.name}: {count} TF32 MMAs with split-precision (3xTF32) emulation "
            f"({evidence.get('cvt_tf32', 0)} TF32 roundings, {evidence.get('sub_f32', 0)} remainders in the PTX): "
            "fp32-accurate by construction; the numeric check decides",
        )
    if not kernel.ptx_available:
        return Finding(
            code="tf32-in-fp32", severity=Severity.WARNING, details=details,
            message=f"{kernel.name}: {count} TF32 tensor-core MMAs in an fp32 problem; without PTX the SASS cannot "
            "tell a TF32 shortcut from 3xTF32 emulation, the numeric check decides",
        )
    return Finding(
        code="tf32-in-fp32", severity=Severity.ERROR, details=details,
        message=f"{kernel.name}: fp32 problem computed with {count} TF32 tensor-core MMAs (10-bit mantissa "
        "operands) and no split-precision emulation: a TF32 shortcut",
    )


# ------------------------------------------------------------------------------------------------ tensor cores


def _tensor_core_findings(
    kernels: Sequence[KernelSummary], traits: ProblemTraits, dtype: str | None, arch: str
) -> list[Finding]:
    if traits.dominant not in TENSOR_DOMINANT:
        return []
    findings: list[Finding] = []
    mma_kernels = [k for k in kernels if k.tensor_core_instructions]
    expects_tc = dtype is not None and (
        _tensor_core_capable(arch, dtype) or (dtype == "fp32" and traits.policy.allow_tf32 and _tensor_core_capable(arch,
                                                                                                                "bf16"))
    )
    if not mma_kernels:
        if expects_tc:
            fma = {k.name: _opcodes(k, ("FFMA", "HFMA2", "DFMA", "IMAD", "IDP")) for k in kernels}
            findings.append(Finding(
                code="no-tensor-core",
                severity=Severity.WARNING,
                message=f"{traits.dominant}-dominant {dtype} problem, but no tensor-core instruction in "
                f"{len(kernels)} kernel(s) for {arch}: the math runs on the SIMT units",
                details={"arch": arch, "kernels": [k.name for k in kernels], "fma_opcodes": fma},
            ))
        return findings
    family = _family(arch)
    for kernel in mma_kernels:
        classes = kernel.histogram_by_class
        kernel_family = _family(kernel.arch) or family
        if kernel_family == "Hopper" and kernel.arch.endswith("a") and classes.get("mma") and not classes.get("wgmma"):
            findings.append(Finding(
                code="legacy-mma-on-hopper",
                severity=Severity.WARNING,
                message=f"{kernel.name}: {classes['mma']} warp-level HMMA and no warpgroup HGMMA on {kernel.arch}; "
                "wgmma needs a warpgroup (4 warps) and 64-row tiles",
                details={**_kernel_evidence(kernel, ("mma", "wgmma")), "mma_opcodes": _opcodes(kernel, ("HMMA",))},
            ))
        if (kernel_family == "Blackwell" and kernel.arch.endswith("a")
                and (classes.get("mma") or classes.get("wgmma")) and not classes.get("tcgen05")):
            findings.append(Finding(
                code="legacy-mma-on-blackwell",
                severity=Severity.WARNING,
                message=f"{kernel.name}: {classes.get('mma', 0) + classes.get('wgmma', 0)} warp-level MMAs and no "
                f"tcgen05 MMA on {kernel.arch}",
                details={**_kernel_evidence(kernel, ("mma", "wgmma", "tcgen05")),
                         "mma_opcodes": _opcodes(kernel, ("HMMA", "HGMMA", "QMMA"))},
            ))
    return findings


# ------------------------------------------------------------------------------------------------ resources


def _resource_findings(kernel: KernelSummary, traits: ProblemTraits) -> list[Finding]:
    findings: list[Finding] = []
    local = _opcodes(kernel, ("LDL", "STL"))
    if kernel.spilled:
        findings.append(Finding(
            code="spills",
            severity=Severity.WARNING,
            message=f"{kernel.name}: registers spill to local memory ({kernel.spill_store_bytes} B stored, "
            f"{kernel.spill_load_bytes} B loaded per thread; {kernel.registers} registers)",
            details={**_kernel_evidence(kernel), "spill_store_bytes": kernel.spill_store_bytes,
                     "spill_load_bytes": kernel.spill_load_bytes, "stack_bytes": kernel.stack_bytes,
                     "registers": kernel.registers, "local_opcodes": local},
        ))
    elif kernel.spilled is None and local:
        findings.append(Finding(
            code="local-memory",
            severity=Severity.NOTE,
            message=f"{kernel.name}: {sum(local.values())} local-memory instructions ({kernel.stack_bytes} B stack): "
            "register spills or a local array (no ptxas log to tell)",
            details={**_kernel_evidence(kernel), "local_opcodes": local, "stack_bytes": kernel.stack_bytes},
        ))
    occupancy = kernel.occupancy or {}
    if occupancy.get("problems"):
        findings.append(Finding(
            code="cannot-launch",
            severity=Severity.ERROR,
            message=f"{kernel.name}: cannot launch on {kernel.arch}: {'; '.join(occupancy['problems'])}",
            details={**_kernel_evidence(kernel), "occupancy": dict(occupancy)},
        ))
    elif occupancy and occupancy.get("occupancy", 1.0) < LOW_OCCUPANCY:
        memory_bound = traits.dominant == "memory"
        guessed = kernel.threads_source == "max_launchable"
        findings.append(Finding(
            code="low-occupancy",
            severity=Severity.WARNING if memory_bound and not guessed else Severity.NOTE,
            message=f"{kernel.name}: {occupancy['warps_per_sm']}/{occupancy['max_warps_per_sm']} warps per SM "
            f"({occupancy['occupancy']:.0%}), limited by {occupancy['limiting']}"
            + (" (at the largest launchable block; launch size unknown)" if guessed else ""),
            details={**_kernel_evidence(kernel), "occupancy": dict(occupancy), "registers": kernel.registers,
                     "shared_bytes": kernel.shared_bytes, "threads_per_block": kernel.threads_per_block},
        ))
    if traits.dominant == "memory":
        finding = _scalar_access_finding(kernel)
        if finding:
            findings.append(finding)
    return findings


def _scalar_access_finding(kernel: KernelSummary) -> Finding | None:
    loads, stores = dict(kernel.global_load_bits), dict(kernel.global_store_bits)
    classes = kernel.histogram_by_class
    if not loads and not stores:
        return None
    vector_async = any((b or 0) >= 64 for b in _async_widths(kernel)) or classes.get("tma", 0) > 0
    if any(bits >= 64 for bits in (*loads, *stores)) or vector_async:
        return None
    return Finding(
        code="scalar-global-access",
        severity=Severity.WARNING,
        message=f"{kernel.name}: memory-bound problem, but every global access moves at most 32 bits per thread "
        f"({sum(loads.values())} loads, {sum(stores.values())} stores; no 64/128-bit access)",
        details={**_kernel_evidence(kernel), "global_load_bits": {str(k): v for k, v in loads.items()},
                 "global_store_bits": {str(k): v for k, v in stores.items()},
                 "global_opcodes": _opcodes(kernel, ("LDG", "STG", "LDGSTS"))},
    )


def _async_widths(kernel: KernelSummary) -> list[int | None]:
    from kernelwright.inspect.sass import access_bits

    return [access_bits(op) for op in kernel.histogram_by_opcode if op.startswith("LDGSTS")]


# ------------------------------------------------------------------------------------------------ ptxas


def _ptxas_findings(kernel: KernelSummary) -> list[Finding]:
    findings: list[Finding] = []
    rules = (
        ("wgmma-serialized", Severity.WARNING, "ptxas serialized the wgmma pipeline"),
        ("wgmma-wait-injected", Severity.NOTE, "ptxas injected waits into the wgmma pipeline"),
        ("setmaxnreg-ignored", Severity.NOTE, "ptxas ignored setmaxnreg"),
    )
    for kind, severity, summary in rules:
        matching = [w for w in kernel.ptxas_warnings if w.kind == kind]
        if not matching:
            continue
        first = matching[0]
        findings.append(Finding(
            code=kind,
            severity=severity,
            message=f"{kernel.name}: {summary} ({first.code or 'ptxas'}"
            + (f", {len(matching)} messages" if len(matching) > 1 else "") + f"): {_reason(first.message)}",
            details={**_kernel_evidence(kernel, ("wgmma", "warpgroup", "setmaxnreg")),
                     "warnings": [w.to_json() for w in matching]},
        ))
    return findings


def _reason(message: str) -> str:
    """The cause in a ptxas message, without its code and function name."""
    text = re.sub(r"^\(C\d{4}\)\s*(Potential Performance Loss:\s*)?", "", message.strip())
    return re.split(r" (?:in the function|in function) ", text, maxsplit=1)[0]
