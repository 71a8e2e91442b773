"""Linear layer with a fused bias + GELU epilogue: out = gelu(x @ W^T + b) (exact erf GELU).

Family: GEMM with epilogue (an FFN up-projection). dtype: bfloat16 (inputs, weights, output).
Shapes: x [4096, 4096], W [16384, 4096], b [16384], out [4096, 16384].
FLOPs: 2 * 4096 * 4096 * 16384 = 550 GFLOP. Bytes: 302 MB. Compute-bound.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 4096
in_features = 4096
out_features = 16384


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(tokens, in_features, dtype=torch.bfloat16)]


def get_init_inputs():
    return [in_features, out_features]
