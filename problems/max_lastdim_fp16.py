"""Maximum over the last dim: out = amax(x, dim=-1).

Family: row reduction. dtype: float16.
Shapes: x [16384, 4096] (128 MiB), out [16384]. Bytes: 134 MB. FLOPs: 67 M comparisons.
Each row is scaled by its own random factor so the row maxima spread widely (a constant is not an answer).
"""

import torch
import torch.nn as nn

batch_size = 16384
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=-1)


def get_inputs():
    scale = 0.25 + 2.0 * torch.rand(batch_size, 1)
    return [(torch.randn(batch_size, dim) * scale).to(torch.float16)]


def get_init_inputs():
    return []
