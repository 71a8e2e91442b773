"""Gated pointwise chain: out = gelu(x) * y + 1 (exact erf GELU).

Family: pointwise. dtype: float32. Shapes: x, y, out [4096, 4096] (64 MiB each).
Bytes: 3 * 64 MiB = 201 MB. FLOPs: about 20 per element (erf dominates); bandwidth-bound.
The +1 keeps the output away from zero so a zeros decoy cannot pass.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 4096
cols = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.gelu(x) * y + 1.0


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
