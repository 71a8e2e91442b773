"""Bias add then SiLU, with the bias broadcast over rows: out = silu(x + bias).

Family: pointwise (broadcast). dtype: bfloat16. Shapes: x [8192, 8192], bias [8192], out [8192, 8192].
Bytes: 2 * 2 * 8192^2 = 268 MB. FLOPs: about 5 per element; bandwidth-bound.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 8192
features = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.silu(x + bias)


def get_inputs():
    x = torch.randn(rows, features, dtype=torch.bfloat16)
    bias = torch.randn(features, dtype=torch.bfloat16)
    return [x, bias]


def get_init_inputs():
    return []
