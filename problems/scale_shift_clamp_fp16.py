"""Per-channel affine then clamp: out = clamp(x * scale[c] + shift[c], lo, hi) on an NCHW tensor.

Family: pointwise (channel broadcast, scalar parameters). dtype: float16.
Shapes: x, out [64, 256, 64, 64] (128 MiB each); scale, shift [256, 1, 1] parameters; lo = -1.5, hi = 2.0.
Bytes: 2 * 2 * 64 * 256 * 64 * 64 = 268 MB. FLOPs: 4 per element; bandwidth-bound.
About 10% of the outputs are clamped, so both branches of the clamp are exercised.
"""

import torch
import torch.nn as nn

batch_size = 64
channels = 256
height = 64
width = 64


class Model(nn.Module):
    def __init__(self, channels: int, lo: float, hi: float):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1, dtype=torch.float16))
        self.shift = nn.Parameter(0.5 * torch.randn(channels, 1, 1, dtype=torch.float16))
        self.lo = lo
        self.hi = hi

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * self.scale + self.shift, self.lo, self.hi)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=torch.float16)]


def get_init_inputs():
    return [channels, -1.5, 2.0]
