"""The GEMM family's configuration: one record a configuration its space lists (generate/families/config.py)."""

from __future__ import annotations

from typing import Literal

from kernelwright.generate.families.config import FamilyConfig, family_config

# The dot's operand precision: an fp32 problem's (native: the problem's own half type; tf32, 3xTF32 or ieee FMA),
# or the CUDA kernels' operand type.
Precision = Literal["native", "tf32", "tf32x3", "ieee", "bfloat16", "float16"]


@family_config
class GemmConfig(FamilyConfig):
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int  # output tiles grouped along M for L2 reuse
    num_stages: int
    num_warps: int
    precision: Precision
    variant: Literal["pointer", "tma", "wgmma", "mma_sync"] | None = None  # None: pointer (cp.async); CUDA's own
    warp_specialize: bool | None = None  # Triton's warp specialisation of the TMA loop
    split_k: int | None = None  # shares of K reduced by separate programs, then summed in order
    kmajor: bool | None = None  # both operands K-major (3xTF32)
    b_tile: Literal["kn", "nk"] | None = None  # B's tile loaded K x N (None) or N x K
    b_copy: bool | None = None  # a K-major B copied N-major first (the FMA dot)
    flatten: bool | None = None  # the K loop flattened (None: yes)
    backend: Literal["triton", "cuda"] | None = None  # None: Triton; cuda: the CUDA C++ kernels
