"""Occupancy and launch constraints, by the rules of ``cuda_occupancy.h`` (GPU_FACTS.md, "Occupancy").

    occupancy("sm_90a", threads_per_block=256, registers_per_thread=128, shared_bytes_per_block=64 * 1024)
    # Occupancy(blocks_per_sm=2, warps_per_sm=16, occupancy=0.25, limiting="registers", ...)

Rules (NVIDIA, sm_70 and later):

- warps per block = ceil(threads / 32);
- registers per warp = roundup(registers_per_thread x 32, 256); an SM has four sub-partitions of 16384 registers, so
  warps limited by registers = floor(16384 / registers_per_warp) x 4, blocks = floor(that / warps per block);
- shared memory per block = roundup(shared bytes, allocation unit) + reserved (1 KiB from sm_80), blocks =
  floor(shared memory per SM / that);
- blocks are also limited by the SM's block slots and warp slots; blocks/SM is the minimum of the four limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelwright.errors import InputError
from kernelwright.hardware.spec import ArchSpec, GpuSpec, arch_spec

# order used to name the limiting resource when several limits tie: at full occupancy the warp slots are the
# limit, whatever else also happens to allow exactly as many blocks
RESOURCES = ("warps", "blocks", "registers", "shared_memory")


@dataclass(frozen=True, kw_only=True)
class Occupancy:
    """Resident blocks per SM for one launch configuration, and what limits it."""

    arch: str
    threads_per_block: int
    registers_per_thread: int
    shared_bytes_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # resident warps / the SM's warp slots
    limiting: str  # one of RESOURCES, or "launch" when the configuration cannot run at all
    limits: dict[str, int]  # blocks per SM allowed by each resource
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "threads_per_block": self.threads_per_block,
            "registers_per_thread": self.registers_per_thread,
            "shared_bytes_per_block": self.shared_bytes_per_block,
            "blocks_per_sm": self.blocks_per_sm,
            "warps_per_sm": self.warps_per_sm,
            "max_warps_per_sm": self.max_warps_per_sm,
            "occupancy": round(self.occupancy, 4),
            "limiting": self.limiting,
            "limits": dict(self.limits),
            "problems": list(self.problems),
        }


def _arch_of(spec_or_arch: GpuSpec | ArchSpec | str) -> ArchSpec:
    if isinstance(spec_or_arch, ArchSpec):
        return spec_or_arch
    if isinstance(spec_or_arch, GpuSpec):
        return arch_spec(spec_or_arch.arch)
    return arch_spec(spec_or_arch)


def _shared_per_sm(spec_or_arch: GpuSpec | ArchSpec | str, arch: ArchSpec) -> int:
    # a live GpuSpec may carry the device's own figure
    if isinstance(spec_or_arch, GpuSpec):
        return spec_or_arch.shared_memory_per_sm_bytes
    return arch.shared_memory_per_sm_bytes


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit if unit > 0 else value


def validate_launch(
    spec_or_arch: GpuSpec | ArchSpec | str,
    *,
    threads_per_block: int,
    registers_per_thread: int = 0,
    shared_bytes_per_block: int = 0,
    features: tuple[str, ...] | frozenset[str] = (),
) -> list[str]:
    """Why this launch configuration cannot run on the arch, one line each; empty when it can.

    ``features`` are feature names from gpus.toml (``"wgmma"``, ``"tma"``, ``"tcgen05"``, ...) the kernel uses.
    """
    arch = _arch_of(spec_or_arch)
    problems: list[str] = []
    if threads_per_block <= 0:
        problems.append(f"a block needs at least one thread (got {threads_per_block})")
    elif threads_per_block > arch.max_threads_per_block:
        problems.append(
            f"{threads_per_block} threads per block exceed the {arch.max_threads_per_block} that {arch.name} allows"
        )
    if registers_per_thread > arch.max_registers_per_thread:
        problems.append(
            f"{registers_per_thread} registers per thread exceed the {arch.max_registers_per_thread} "
            f"that {arch.name} allows"
        )
    if arch.is_cuda and registers_per_thread > 0 and threads_per_block > 0:
        warps = -(-threads_per_block // arch.warp_size)
        block_regs = warps * _round_up(registers_per_thread * arch.warp_size, arch.register_alloc_unit)
        if block_regs > arch.max_registers_per_block:
            problems.append(
                f"{threads_per_block} threads x {registers_per_thread} registers need {block_regs} registers "
                f"per block; {arch.name} has {arch.max_registers_per_block} (use fewer threads or __launch_bounds__)"
            )
    optin = (
        spec_or_arch.shared_memory_per_block_optin_bytes
        if isinstance(spec_or_arch, GpuSpec)
        else arch.shared_memory_per_block_optin_bytes
    )
    if shared_bytes_per_block > optin:
        problems.append(
            f"{shared_bytes_per_block} bytes of shared memory per block exceed the opt-in limit of {optin} "
            f"bytes ({optin // 1024} KiB) on {arch.name}"
        )
    if shared_bytes_per_block < 0:
        problems.append(f"shared memory cannot be negative (got {shared_bytes_per_block})")
    known = _known_features()
    unknown = sorted(set(features) - known)
    if unknown:
        raise InputError(f"unknown feature name(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    missing = sorted(set(features) - arch.features)
    for feature in missing:
        problems.append(f"{arch.name} has no {feature}{_feature_hint(feature, arch)}")
    return problems


def _known_features() -> set[str]:
    from kernelwright.hardware.spec import all_archs

    return {feature for spec in all_archs() for feature in spec.features}


def _feature_hint(feature: str, arch: ArchSpec) -> str:
    cc = arch.compute_capability
    if feature == "wgmma" and cc and cc >= (10, 0):
        return " (wgmma is sm_90a's alone; Blackwell's tensor cores are driven by tcgen05)"
    if feature in ("wgmma", "setmaxnreg") and cc == (9, 0):
        return " unless compiled for the arch-specific target sm_90a"
    if feature == "tcgen05" and cc and cc[0] == 10:
        return f" unless compiled for the arch-specific target {arch.name.rstrip('af')}a"
    needs = {
        "wgmma": "sm_90a",
        "setmaxnreg": "sm_90a",
        "tcgen05": "sm_100a",
        "tma": "sm_90",
        "cp.async": "sm_80",
        "bf16": "sm_80",
        "tf32": "sm_80",
        "fp8": "sm_89",
        "dpx": "sm_90",
        "ldmatrix": "sm_75",
        "stmatrix": "sm_90",
    }
    return f" (it needs {needs[feature]} or later)" if feature in needs else ""


def occupancy(
    spec_or_arch: GpuSpec | ArchSpec | str,
    *,
    threads_per_block: int,
    registers_per_thread: int,
    shared_bytes_per_block: int,
) -> Occupancy:
    """Resident blocks per SM and the limiting resource. A configuration that cannot launch gives 0 blocks,
    ``limiting="launch"`` and the reasons in ``problems``. ``registers_per_thread=0`` means unknown (no limit)."""
    arch = _arch_of(spec_or_arch)
    if not arch.is_cuda:
        raise InputError(f"occupancy rules for {arch.name} ({arch.family}) are not modelled; only NVIDIA archs are")
    problems = validate_launch(
        spec_or_arch,
        threads_per_block=threads_per_block,
        registers_per_thread=registers_per_thread,
        shared_bytes_per_block=shared_bytes_per_block,
    )
    max_warps = arch.max_warps_per_sm
    if problems:
        return Occupancy(
            arch=arch.name,
            threads_per_block=threads_per_block,
            registers_per_thread=registers_per_thread,
            shared_bytes_per_block=shared_bytes_per_block,
            blocks_per_sm=0,
            warps_per_sm=0,
            max_warps_per_sm=max_warps,
            occupancy=0.0,
            limiting="launch",
            limits={},
            problems=tuple(problems),
        )
    warps_per_block = -(-threads_per_block // arch.warp_size)
    limits = {
        "blocks": arch.max_blocks_per_sm,
        "warps": max_warps // warps_per_block,
        "registers": _register_limit(arch, warps_per_block, registers_per_thread),
        "shared_memory": _shared_limit(arch, _shared_per_sm(spec_or_arch, arch), shared_bytes_per_block),
    }
    blocks = min(limits.values())
    limiting = next(name for name in RESOURCES if limits[name] == blocks)
    warps = blocks * warps_per_block
    return Occupancy(
        arch=arch.name,
        threads_per_block=threads_per_block,
        registers_per_thread=registers_per_thread,
        shared_bytes_per_block=shared_bytes_per_block,
        blocks_per_sm=blocks,
        warps_per_sm=warps,
        max_warps_per_sm=max_warps,
        occupancy=warps / max_warps,
        limiting=limiting,
        limits=limits,
    )


def _register_limit(arch: ArchSpec, warps_per_block: int, registers_per_thread: int) -> int:
    if registers_per_thread <= 0:
        return arch.max_blocks_per_sm
    regs_per_warp = _round_up(registers_per_thread * arch.warp_size, arch.register_alloc_unit)
    per_subpartition = arch.registers_per_sm // 4
    warps = (per_subpartition // regs_per_warp) * 4
    return warps // warps_per_block


def _shared_limit(arch: ArchSpec, shared_per_sm: int, shared_bytes: int) -> int:
    per_block = _round_up(shared_bytes, arch.shared_alloc_unit_bytes) + arch.reserved_shared_per_block_bytes
    if per_block <= 0:
        return arch.max_blocks_per_sm
    return shared_per_sm // per_block
