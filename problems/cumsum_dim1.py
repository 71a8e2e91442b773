"""Prefix sum along a middle dim: out[b, :, d] = cumsum(x[b, :, d]) (a strided scan over 4096 steps).

Family: scan (inner, non-contiguous dim). dtype: float32.
Shapes: x, out [16, 4096, 1024] (256 MiB each). Bytes: 537 MB. FLOPs: 67 M adds.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 4096
features = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, seq_len, features)]


def get_init_inputs():
    return []
