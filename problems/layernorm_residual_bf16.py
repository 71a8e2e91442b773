"""Residual add then LayerNorm (post-norm transformer): out = LayerNorm(x + residual).

Family: row reduction with a pointwise prologue. dtype: bfloat16 (inputs, parameters, output).
Shapes: x, residual, out [8192, 4096] (64 MiB each); weight, bias [4096] (random).
Bytes: 3 * 64 MiB = 201 MB. FLOPs: about 9 per element.
"""

import torch
import torch.nn as nn

tokens = 8192
dim = 4096


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5, dtype=torch.bfloat16)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


def get_inputs():
    x = torch.randn(tokens, dim, dtype=torch.bfloat16)
    residual = torch.randn(tokens, dim, dtype=torch.bfloat16)
    return [x, residual]


def get_init_inputs():
    return [dim]
