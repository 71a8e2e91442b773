"""Square GEMM in full fp32: out = a @ b (TF32 tensor cores would be a precision shortcut).

Family: GEMM. dtype: float32.
Shapes: a, b, out [4096, 4096]. FLOPs: 137 GFLOP. Bytes: 201 MB. Compute-bound.
"""

import torch
import torch.nn as nn

M = 4096
K = 4096
N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
