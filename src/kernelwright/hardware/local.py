"""The GPU this process can see: the knowledge-base row for it, corrected by the device's live properties."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from kernelwright.errors import InputError
from kernelwright.hardware.spec import GpuSpec, all_archs, all_gpus, arch_spec, normalize_name

log = logging.getLogger(__name__)


def arch_for_capability(major: int, minor: int) -> str:
    """The arch kernelwright targets on a device of this compute capability: the arch-specific variant where the
    hardware has one (``sm_90a`` on Hopper, ``sm_100a`` on Blackwell), since the device runs those features."""
    name = f"sm_{major}{minor}"
    known = {arch.name for arch in all_archs()}
    return next((candidate for candidate in (name + "a", name) if candidate in known), name)


def match_device(name: str, compute_capability: tuple[int, int] | None, sm_count: int | None) -> GpuSpec | None:
    """The knowledge-base row for a device called ``name`` (as ``torch.cuda.get_device_name`` reports it).

    An alias matches exactly; otherwise rows whose name or alias occurs in the device name and whose compute
    capability agrees are candidates, the one with the same SM count (then the longest matching name) wins.
    """
    key = normalize_name(name)
    gpus = all_gpus()
    for gpu in gpus:
        if key in {normalize_name(n) for n in (gpu.name, *gpu.aliases)}:
            return gpu
    candidates: list[tuple[bool, int, GpuSpec]] = []
    for gpu in gpus:
        if compute_capability and gpu.compute_capability and gpu.compute_capability != compute_capability:
            continue
        lengths = [len(k) for k in (normalize_name(n) for n in (gpu.name, *gpu.aliases)) if k and k in key]
        if lengths:
            candidates.append((gpu.sm_count == sm_count, max(lengths), gpu))
    if not candidates:
        return None
    candidates.sort(key=lambda c: (c[0], c[1]), reverse=True)
    return candidates[0][2]


def spec_from_properties(props: Any) -> GpuSpec:
    """A :class:`GpuSpec` for a device from its ``torch.cuda.get_device_properties`` (or anything with the same
    attributes): the knowledge-base row when the name is known, with SM count, L2, shared memory, registers and
    compute capability taken from the device; an unknown device gets a row built from its properties alone, with
    no datasheet peaks."""
    name = str(props.name)
    gcn = getattr(props, "gcnArchName", "") or ""
    if gcn.startswith("gfx"):
        arch, cc = gcn.split(":")[0], None
    else:
        cc = (int(props.major), int(props.minor))
        arch = arch_for_capability(*cc)
    sm_count = int(props.multi_processor_count)
    row = match_device(name, cc, sm_count)
    try:
        base_arch = arch_spec(arch)
    except InputError:
        base_arch = None
    if row is None:
        if base_arch is None:
            raise InputError(f"device {name!r} has arch {arch}, which kernelwright does not know")
        log.info("device %r is not in the knowledge base; using its properties and %s limits", name, arch)
        row = GpuSpec(
            name=name,
            vendor=base_arch.vendor,
            arch=arch,
            compute_capability=cc,
            sm_count=sm_count,
            max_threads_per_block=base_arch.max_threads_per_block,
            max_threads_per_sm=base_arch.max_threads_per_sm,
            max_blocks_per_sm=base_arch.max_blocks_per_sm,
            registers_per_sm=base_arch.registers_per_sm,
            max_registers_per_thread=base_arch.max_registers_per_thread,
            shared_memory_per_sm_bytes=base_arch.shared_memory_per_sm_bytes,
            shared_memory_per_block_optin_bytes=base_arch.shared_memory_per_block_optin_bytes,
            l2_bytes=0,
            last_level_cache_bytes=0,
            memory_bytes=0,
            memory_bandwidth_gbs=_bandwidth_from_properties(props),
            boost_clock_mhz=float(getattr(props, "clock_rate", 0) or 0) / 1000.0,
            peak_tflops={},
            features=base_arch.features,
            source="live device properties (not in the knowledge base: no datasheet peaks)",
        )
    overrides: dict[str, Any] = {"sm_count": sm_count, "compute_capability": cc, "live": True}
    if base_arch is not None and row.arch.rstrip("af") != arch.rstrip("af"):
        overrides |= {"arch": arch, "features": base_arch.features}
    for attr, field_name in (
        ("L2_cache_size", "l2_bytes"),
        ("shared_memory_per_multiprocessor", "shared_memory_per_sm_bytes"),
        ("shared_memory_per_block_optin", "shared_memory_per_block_optin_bytes"),
        ("regs_per_multiprocessor", "registers_per_sm"),
        ("max_threads_per_multi_processor", "max_threads_per_sm"),
        ("total_memory", "memory_bytes"),
    ):
        value = getattr(props, attr, None)
        if isinstance(value, int) and value > 0:
            overrides[field_name] = value
    if "l2_bytes" in overrides and row.last_level_cache_bytes <= row.l2_bytes:
        overrides["last_level_cache_bytes"] = overrides["l2_bytes"]
    return replace(row, **overrides)


def _bandwidth_from_properties(props: Any) -> float:
    """Peak DRAM bandwidth (GB/s) from memory clock (kHz) and bus width (bits), double data rate; 0 if unknown."""
    clock_khz = getattr(props, "memory_clock_rate", 0) or 0
    bus_bits = getattr(props, "memory_bus_width", 0) or 0
    return 2.0 * clock_khz * 1e3 * bus_bits / 8 / 1e9 if clock_khz and bus_bits else 0.0


def local_gpu(index: int = 0) -> GpuSpec | None:
    """The GPU at CUDA device ``index``, or None when torch sees no CUDA (or ROCm) device there."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        return None
    return spec_from_properties(torch.cuda.get_device_properties(index))


def target_arch(device: str, requested: str | None = None) -> str:
    """The one arch a search writes and inspects kernels for: the one asked for (canonical, known to the knowledge
    base), else the local GPU's when kernels run on it, else the configured default (``KERNELWRIGHT_ARCH``)."""
    from kernelwright.config import config
    from kernelwright.hardware.spec import known_archs

    if requested:
        return known_archs(requested)[0]
    if device == "cuda":
        try:
            gpu = local_gpu()
        except Exception as exc:  # noqa: BLE001 - an unreadable device: fall back to the configured arch
            log.info("the local GPU could not be read (%s); targeting %s", exc, config.arch)
            gpu = None
        if gpu is not None:
            return gpu.arch
    return known_archs(config.arch)[0]


def resolve_device(requested: str | None) -> str:
    """"cpu" or "cuda" from a --device value (auto: the GPU where torch sees one); one-line errors otherwise."""
    from kernelwright.config import config
    from kernelwright.errors import ConfigError

    value = (requested or config.device or "auto").lower()
    if value not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device {value!r} is not one of auto, cpu, cuda; pass --device cpu or --device cuda")
    if value == "auto":
        return "cuda" if _cuda_available() else "cpu"
    if value == "cuda" and not _cuda_available():
        raise InputError("--device cuda was asked for, but no CUDA GPU is visible here; use --device cpu")
    return value


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())
