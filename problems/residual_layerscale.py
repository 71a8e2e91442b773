"""Residual add with a per-feature LayerScale and a scalar rescale: out = (residual + gamma * x) * alpha.

Family: pointwise (feature broadcast, scalar parameter). dtype: float32.
Shapes: x, residual, out [4, 4096, 4096] (256 MiB each); gamma [4096] parameter in [0, 1); alpha = 1/sqrt(2).
Bytes: 3 * 256 MiB = 805 MB. FLOPs: 3 per element; bandwidth-bound.
gamma is O(1) (not LayerScale's usual 1e-5 init), so a copy of `residual` is not a passing answer.
"""

import torch
import torch.nn as nn

batch_size = 4
seq_len = 4096
dim = 4096


class Model(nn.Module):
    def __init__(self, dim: int, alpha: float):
        super().__init__()
        self.gamma = nn.Parameter(torch.rand(dim))
        self.alpha = alpha

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return (residual + self.gamma * x) * self.alpha


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim), torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, 2.0**-0.5]
