"""LayerNorm over the last dim with a learned affine: out = (x - mean) / sqrt(var + eps) * weight + bias.

Family: row reduction (mean and variance, then an affine epilogue). dtype: float32.
Shapes: x, out [4096, 8192] (128 MiB each); weight, bias [8192]. Bytes: 268 MB. FLOPs: about 8 per element.
weight and bias are drawn at random (not LayerNorm's 1/0 init) so a kernel that ignores them fails, and x has
a non-zero mean and non-unit scale so the mean subtraction matters.
"""

import torch
import torch.nn as nn

batch_size = 4096
dim = 8192


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, dim) * 3.0 + 1.0]


def get_init_inputs():
    return [dim]
