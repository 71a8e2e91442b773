"""3x3 convolution (stride 1, padding 1) with bias, then ReLU.

Family: convolution. dtype: float32 (full precision; cuDNN's default TF32 would be a shortcut).
Shapes: x [32, 64, 128, 128] (128 MiB), weight [128, 64, 3, 3], bias [128], out [32, 128, 128, 128] (256 MiB).
FLOPs: 2 * 32 * 128 * 128^2 * 64 * 9 = 77 GFLOP. Bytes: 403 MB.
"""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
