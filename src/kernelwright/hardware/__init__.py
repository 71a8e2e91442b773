"""The hardware knowledge base, occupancy rules and measured ceilings (docs/protocol.md, "Instruction-level evidence").

    from kernelwright.hardware import lookup, local_gpu, occupancy
    lookup("H100").memory_bandwidth_gbs                   # 3350.0, from gpus.toml (a data file with sources)
    local_gpu()                                           # None without a CUDA device
    occupancy("sm_90a", threads_per_block=256, registers_per_thread=128, shared_bytes_per_block=65536)

Measured ceilings live in :mod:`kernelwright.hardware.calibration` (they import torch when measuring).
Importing this package pulls in only the standard library.
"""

from __future__ import annotations

from kernelwright.hardware.local import local_gpu, spec_from_properties
from kernelwright.hardware.occupancy import Occupancy, occupancy, validate_launch
from kernelwright.hardware.spec import (
    PEAK_KEYS,
    ArchSpec,
    GpuSpec,
    all_archs,
    all_gpus,
    arch_spec,
    canonical_arch,
    compute_capability_of,
    lookup,
)

__all__ = [
    "PEAK_KEYS",
    "ArchSpec",
    "GpuSpec",
    "Occupancy",
    "all_archs",
    "all_gpus",
    "arch_spec",
    "canonical_arch",
    "compute_capability_of",
    "local_gpu",
    "lookup",
    "occupancy",
    "spec_from_properties",
    "validate_launch",
]
