"""Inclusive prefix product along the last dim: out = cumprod(x, dim=-1).

Family: scan. dtype: float32.
Shapes: x, out [4096, 4096] (64 MiB each). Bytes: 134 MB. FLOPs: 16.8 M multiplies.
Inputs are 1 + 0.02 * N(0, 1), so log|out| is a random walk with std about 1.3 after 4096 steps: the products
stay finite and well away from 0 and from 1.
"""

import torch
import torch.nn as nn

batch_size = 4096
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=-1)


def get_inputs():
    return [1.0 + 0.02 * torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
