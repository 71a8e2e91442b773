"""Minimum down the columns: out[j] = min_i x[i, j] (reduction over the leading, strided dim).

Family: column reduction. dtype: float32.
Shapes: x [8192, 4096] (128 MiB), out [4096]. Bytes: 134 MB. FLOPs: 33 M comparisons.
Each column has its own random scale and offset, so the column minima spread widely.
"""

import torch
import torch.nn as nn

rows = 8192
cols = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.min(x, dim=0).values


def get_inputs():
    scale = 0.5 + torch.rand(1, cols)
    offset = torch.randn(1, cols)
    return [torch.randn(rows, cols) * scale + offset]


def get_init_inputs():
    return []
