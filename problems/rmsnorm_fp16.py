"""RMSNorm (Llama style): out = (x / sqrt(mean(x^2, -1) + eps) * weight), computed in fp32, stored in fp16.

Family: row reduction. dtype: float16 in and out, float32 inside.
Shapes: x, out [4096, 8192]; weight [8192] (random, so it cannot be ignored).
Bytes: 2 * 2 * 4096 * 8192 = 134 MB. FLOPs: about 4 per element.
"""

import torch
import torch.nn as nn

batch_size = 4096
dim = 8192


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(dim, dtype=torch.float16))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.float16)]


def get_init_inputs():
    return [dim, 1e-6]
