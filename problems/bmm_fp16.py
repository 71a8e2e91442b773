"""Batched GEMM: out[i] = a[i] @ b[i].

Family: batched GEMM. dtype: float16 (fp32 accumulation expected).
Shapes: a [16, 2048, 1024], b [16, 1024, 2048], out [16, 2048, 2048].
FLOPs: 2 * 16 * 2048 * 2048 * 1024 = 137 GFLOP. Bytes: 268 MB. Compute-bound.
"""

import torch
import torch.nn as nn

batch_size = 16
M = 2048
K = 1024
N = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    a = torch.randn(batch_size, M, K, dtype=torch.float16)
    b = torch.randn(batch_size, K, N, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
