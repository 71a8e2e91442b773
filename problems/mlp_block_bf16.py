"""Transformer MLP block: out = fc2(gelu_tanh(fc1(x))).

Family: whole block (two GEMMs with a fused activation between them). dtype: bfloat16.
Shapes: x [4096, 4096], fc1 W [16384, 4096] + b, fc2 W [4096, 16384] + b, out [4096, 4096].
FLOPs: 2 * 2 * 4096 * 4096 * 16384 = 1.1 TFLOP. Bytes: 336 MB with the hidden activation kept off DRAM
(eager also writes and reads the 128 MiB [4096, 16384] hidden).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 4096
dim = 4096
hidden = 16384


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, dtype=torch.bfloat16)
        self.fc2 = nn.Linear(hidden, dim, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


def get_inputs():
    return [torch.randn(tokens, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return [dim, hidden]
