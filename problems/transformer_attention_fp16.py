"""Transformer self-attention layer: fused QKV projection, causal attention over 16 heads, output projection.

Family: whole block. dtype: float16.
Shapes: x, out [4, 2048, 1024]; W_qkv [3072, 1024] + b; W_out [1024, 1024] + b; 16 heads of 64.
FLOPs: QKV 51.5 G + attention 34.4 G (causal half of 68.7) + output 17.2 G = about 103 GFLOP.
Bytes: 42 MB (x, out, weights) if nothing else leaves the chip.
W_qkv is drawn with std 1.5/sqrt(dim) so q and k have std 1.5, the logits std about 2.2, and the attention is
peaked as in a trained model (with the default init the late rows average ~2000 values and sit near 0).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
seq_len = 2048
dim = 1024
num_heads = 16


class Model(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim, dtype=torch.float16)
        self.out = nn.Linear(dim, dim, dtype=torch.float16)
        nn.init.normal_(self.qkv.weight, std=1.5 * dim**-0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(batch, length, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, length, width))


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim, dtype=torch.float16)]


def get_init_inputs():
    return [dim, num_heads]
