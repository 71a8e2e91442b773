"""The convolution family's configuration: one record a configuration its space lists (generate/families/config.py).
Each variant has its own settings; a record missing one of its variant's is refused where it is made."""

from __future__ import annotations

from typing import Literal

from kernelwright.errors import ConfigError
from kernelwright.generate.families.config import FamilyConfig, family_config

# What each variant reads besides num_warps.
NEEDS = {
    "direct": ("BLOCK",),
    "library": ("BLOCK",),
    "library_nhwc": ("BLOCK_P", "BLOCK_C"),
    "tma": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "precision"),
    "implicit_gemm": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "layout", "precision"),
}


@family_config
class ConvConfig(FamilyConfig):
    # direct: our kernel over the taps (depthwise); library: cuDNN, then our epilogue pass; library_nhwc: the same
    # on channels-last tensors; tma: the implicit GEMM with TMA boxes of the channels-last input; implicit_gemm: ours.
    variant: Literal["direct", "library", "library_nhwc", "tma", "implicit_gemm"]
    BLOCK: int | None = None  # pixels a program (direct, library's epilogue)
    BLOCK_P: int | None = None  # pixels x
    BLOCK_C: int | None = None  # channels: library_nhwc's epilogue tiles
    BLOCK_M: int | None = None  # the implicit GEMM's output pixels,
    BLOCK_N: int | None = None  # output channels
    BLOCK_K: int | None = None  # and reduction (input channels x taps) a tile
    num_warps: int
    num_stages: int | None = None
    layout: Literal["nchw", "nhwc"] | None = None  # the input's layout for the patch loads
    precision: Literal["half", "ieee", "tf32", "tf32x3"] | None = None  # the dot's operands
    w_kmajor: bool | None = None  # the filter laid out with C_in contiguous (3xTF32's wgmma reads K-major)

    def __post_init__(self) -> None:
        super().__post_init__()
        missing = [name for name in NEEDS[self.variant] if getattr(self, name) is None]
        if missing:
            raise ConfigError(f"ConvConfig: variant {self.variant!r} needs {', '.join(missing)}")
