"""Inclusive prefix sum along the last dim: out = cumsum(x, dim=-1).

Family: scan. dtype: float32.
Shapes: x, out [4096, 4096] (64 MiB each). Bytes: 134 MB. FLOPs: 16.8 M adds.
"""

import torch
import torch.nn as nn

batch_size = 4096
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
