"""SwiGLU activation of a fused gate/up projection: gate, up = x.chunk(2, -1); out = silu(gate) * up.

Family: pointwise (two strided halves of one tensor). dtype: bfloat16.
Shapes: x [4096, 2 * 14336] (Llama-3-8B FFN width), out [4096, 14336].
Bytes: 2 * 4096 * (28672 + 14336) = 352 MB. FLOPs: about 5 per output element; bandwidth-bound.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 4096
hidden = 14336


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


def get_inputs():
    return [torch.randn(tokens, 2 * hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
