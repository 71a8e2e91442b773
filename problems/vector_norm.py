"""Euclidean norm of each row: out = ||x[i, :]||_2.

Family: row reduction (square, sum, sqrt). dtype: float32.
Shapes: x [16384, 4096] (256 MiB), out [16384]. Bytes: 268 MB. FLOPs: 2 per element.
Rows carry their own random scale, so the norms vary by an order of magnitude instead of all sitting near 64.
"""

import torch
import torch.nn as nn

batch_size = 16384
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(x, ord=2, dim=-1)


def get_inputs():
    scale = 0.1 + 2.0 * torch.rand(batch_size, 1)
    return [torch.randn(batch_size, dim) * scale]


def get_init_inputs():
    return []
