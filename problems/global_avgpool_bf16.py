"""Global average pooling of a CNN feature map: out[n, c] = mean over (h, w) of x[n, c, h, w].

Family: reduction over the last two dims (49 elements per output: short, odd-sized rows). dtype: bfloat16.
Shapes: x [512, 2048, 7, 7] (98 MiB, a ResNet-50 final feature map), out [512, 2048].
Bytes: 105 MB. FLOPs: 51 M adds. Outputs have std about 0.14 (mean of 49 unit normals).
"""

import torch
import torch.nn as nn

batch_size = 512
channels = 2048
height = 7
width = 7


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=(2, 3))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
