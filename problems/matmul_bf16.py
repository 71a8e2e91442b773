"""Large square GEMM: out = a @ b.

Family: GEMM. dtype: bfloat16 (fp32 accumulation expected; output bf16).
Shapes: a, b, out [8192, 8192]. FLOPs: 2 * 8192^3 = 1.1 TFLOP. Bytes: 403 MB. Compute-bound.
"""

import torch
import torch.nn as nn

M = 8192
K = 8192
N = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(K, N, dtype=torch.bfloat16)
    return [a, b]


def get_init_inputs():
    return []
