"""Sum over a middle dim: out[b, d] = sum_s x[b, s, d] (a strided reduction; the reduced dim is not contiguous).

Family: inner-dim reduction. dtype: float32.
Shapes: x [64, 4096, 256] (256 MiB), out [64, 256]. Bytes: 268 MB. FLOPs: 67 M adds.
Outputs have std about 64 (sum of 4096 unit normals).
"""

import torch
import torch.nn as nn

batch_size = 64
seq_len = 4096
features = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, seq_len, features)]


def get_init_inputs():
    return []
