"""CPU-sized softmax over the last dim, for the README's CPU example: out = softmax(x, dim=-1).

Family: row reduction. dtype: float32. Shapes: x, out [64, 1000] (1000 columns: not a power of two, so the
kernel's masking matters). Bytes: 512 KB. Solved by examples/softmax_triton.py.
"""

import torch
import torch.nn as nn

batch_size = 64
dim = 1000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
