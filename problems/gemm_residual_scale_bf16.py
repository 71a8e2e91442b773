"""GEMM with a scaled-residual epilogue: out = (a @ b) * alpha + residual, alpha = 1/sqrt(K).

Family: GEMM with epilogue. dtype: bfloat16.
Shapes: a [4096, 4096], b [4096, 4096], residual, out [4096, 4096].
FLOPs: 137 GFLOP. Bytes: 134 MB. Compute-bound.
alpha makes the product and the residual the same size (both std about 1), so neither term can be dropped.
"""

import torch
import torch.nn as nn

M = 4096
K = 4096
N = 4096


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, a: torch.Tensor, b: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b) * self.alpha + residual


def get_inputs():
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(K, N, dtype=torch.bfloat16)
    residual = torch.randn(M, N, dtype=torch.bfloat16)
    return [a, b, residual]


def get_init_inputs():
    return [K**-0.5]
