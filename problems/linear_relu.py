"""Linear layer + ReLU in fp32: out = relu(x @ W^T + b).

Family: GEMM with epilogue. dtype: float32 (full precision; TF32 would be a shortcut).
Shapes: x [4096, 4096], W [4096, 4096], b [4096], out [4096, 4096].
FLOPs: 137 GFLOP. Bytes: 201 MB. Compute-bound.
"""

import torch
import torch.nn as nn

tokens = 4096
in_features = 4096
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(tokens, in_features)]


def get_init_inputs():
    return [in_features, out_features]
