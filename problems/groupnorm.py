"""GroupNorm with 32 groups on an NCHW activation: statistics over (C/G, H, W) per sample and group.

Family: reduction over inner dims (32768 elements per group). dtype: float32.
Shapes: x, out [32, 256, 64, 64] (128 MiB each); weight, bias [256] (random). Bytes: 268 MB.
FLOPs: about 8 per element.
"""

import torch
import torch.nn as nn

batch_size = 32
channels = 256
num_groups = 32
height = 64
width = 64


class Model(nn.Module):
    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels, eps=1e-5)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 2.0 + 0.5]


def get_init_inputs():
    return [num_groups, channels]
