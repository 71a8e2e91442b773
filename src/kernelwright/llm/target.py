"""The target's facts as the prompt shows them: the GPU's datasheet numbers, the arch's limits and instruction
features from the hardware knowledge base, and the ceilings measured on the device when there are some.

Kept apart from the prompt assembly because it only reads :mod:`kernelwright.hardware` (and ``prompts/hints.md``
for what each instruction feature is for), never a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kernelwright.llm.templates import _hints

if TYPE_CHECKING:
    from kernelwright.hardware.spec import ArchSpec, GpuSpec


def _arch(arch: str) -> ArchSpec | None:
    from kernelwright.errors import InputError
    from kernelwright.hardware.spec import arch_spec

    try:
        return arch_spec(arch)
    except InputError:
        return None


def _resolve_gpu(gpu: GpuSpec | str | None) -> GpuSpec | None:
    if gpu is None or not isinstance(gpu, str):
        return gpu
    from kernelwright.hardware.spec import lookup

    return lookup(gpu)


_OPERAND_TYPES = (("mma.sync", "fp16"), ("bf16", "bf16"), ("tf32", "tf32"), ("fp8", "fp8 (e4m3/e5m2)"),
                  ("fp6", "fp6"), ("fp4", "fp4"), ("int8-mma", "int8"), ("fp64-mma", "fp64"))
_PEAK_LABELS = (("fp64", "fp64"), ("fp64_tensor", "fp64 tensor"), ("fp32", "fp32 (SIMT)"), ("tf32", "tf32"),
                ("fp16", "fp16"), ("bf16", "bf16"), ("fp8", "fp8"), ("int8", "int8 (TOP/s)"), ("fp4", "fp4"))


def hardware_facts(arch: str, gpu: GpuSpec | str | None = None, ceilings: Mapping[str, Any] | Any = None) -> str:
    """The target's facts as a short list: SMs, limits, memory, peaks, instruction features of ``arch``, and the
    measured ceilings (``{"copy_gbs": ..., "matmul_tflops": {...}}`` or a calibration ``Ceilings``) when given."""
    gpu = _resolve_gpu(gpu)
    spec = _arch(arch)
    title = f"{gpu.name}, {arch}" if gpu else arch
    if spec:
        cc = ".".join(map(str, spec.compute_capability)) if spec.compute_capability else "?"
        title += f" ({spec.family}, compute capability {cc})"
    lines = [f"- GPU: {title}"]
    if gpu:
        lines.append(f"- {gpu.sm_count} SMs; boost clock {gpu.boost_clock_mhz:.0f} MHz")
    if spec:
        lines.append(f"- threads: warp {spec.warp_size}; up to {spec.max_threads_per_block} per block, "
                     f"{spec.max_threads_per_sm} ({spec.max_warps_per_sm} warps) and {spec.max_blocks_per_sm} blocks "
                     "per SM")
        lines.append(f"- registers: {spec.registers_per_sm // 1024}K 32-bit per SM, at most "
                     f"{spec.max_registers_per_thread} per thread")
        lines.append(f"- shared memory: {spec.shared_memory_per_block_bytes // 1024} KiB per block by default, up to "
                     f"{spec.shared_memory_per_block_optin_bytes // 1024} KiB per block with the opt-in attribute, "
                     f"{spec.shared_memory_per_sm_bytes // 1024} KiB per SM")
    if gpu:
        memory = f"{gpu.memory_bytes / 1e9:.0f} GB at " if gpu.memory_bytes else ""
        lines.append(f"- L2 cache {gpu.l2_bytes / (1 << 20):.0f} MiB; memory {memory}{gpu.memory_bandwidth_gbs:.0f} GB/s "
                     "(datasheet)")
        peaks = [f"{label} {gpu.peak_tflops[key]:g}" for key, label in _PEAK_LABELS if gpu.peak_tflops.get(key)]
        if peaks:
            lines.append("- dense peak TFLOP/s: " + ", ".join(peaks))
    measured = _ceilings_line(ceilings)
    if measured:
        lines.append(measured)
    if spec:
        types = [label for key, label in _OPERAND_TYPES if key in spec.features]
        if types and ("mma.sync" in spec.features or "mfma" in spec.features):
            lines.append("- tensor-core operand types: " + ", ".join(types))
        features = [f"{key}: {text}" for key, text in _hints("features").items() if key in spec.features]
        if features:
            lines.append(f"- instruction features of {arch}:")
            lines += [f"  - {f}" for f in features]
    return "\n".join(lines)


def _ceilings_line(ceilings: Any) -> str:
    if ceilings is None:
        return ""
    data = ceilings.to_json() if hasattr(ceilings, "to_json") else dict(ceilings)
    parts = []
    if data.get("copy_gbs"):
        parts.append(f"copy {float(data['copy_gbs']):.0f} GB/s (read + write)")
    rates = data.get("matmul_tflops") or {}
    if rates:
        parts.append("library matmul " + ", ".join(f"{k} {float(v):.0f}" for k, v in rates.items()) + " TFLOP/s")
    return "- measured on this device: " + "; ".join(parts) if parts else ""
