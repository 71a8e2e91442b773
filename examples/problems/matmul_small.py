"""CPU-sized GEMM for the README's CPU example: out = a @ b.

Family: GEMM. dtype: float16. Shapes: a [128, 96], b [96, 80], out [128, 80] (96 and 80 are not multiples of
64, so edge tiles are exercised). FLOPs: 2 * 128 * 96 * 80 = 2.0 MFLOP. Solved by examples/matmul_triton.py.
"""

import torch
import torch.nn as nn

M = 128
K = 96
N = 80


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
