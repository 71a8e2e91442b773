"""Elementwise add of two fp32 vectors: out = a + b.

Family: pointwise. dtype: float32. Size: n = 2**26 elements (256 MiB per tensor).
Bytes: 3 * 4 * n = 805 MB (two reads, one write). FLOPs: n. Pure bandwidth: the floor is a copy-speed stream.
"""

import torch
import torch.nn as nn

n = 2**26


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
