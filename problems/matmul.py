"""Square GEMM: out = a @ b.

Family: GEMM. dtype: float16 (fp32 accumulation expected; output fp16).
Shapes: a [4096, 4096], b [4096, 4096], out [4096, 4096]. FLOPs: 2 * 4096^3 = 137 GFLOP.
Bytes: 3 * 32 MiB = 101 MB. Compute-bound (arithmetic intensity about 1365 FLOP/byte).
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
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
