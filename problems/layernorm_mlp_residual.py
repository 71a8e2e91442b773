"""Pre-norm transformer MLP sublayer: out = x + fc2(gelu(fc1(LayerNorm(x)))).

Family: whole block (norm + two GEMMs + activation + residual). dtype: float32.
Shapes: x, out [4096, 2048]; LayerNorm weight/bias [2048] (random); fc1 [8192, 2048] + b; fc2 [2048, 8192] + b.
FLOPs: 2 * 2 * 4096 * 2048 * 8192 = 275 GFLOP. Bytes: 201 MB (x, out, weights).
The MLP branch has std about 0.3 next to x's 1, so a copy of x is not a passing answer.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 4096
dim = 2048
hidden = 8192


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def get_inputs():
    return [torch.randn(tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
