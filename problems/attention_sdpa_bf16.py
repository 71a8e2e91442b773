"""Non-causal attention through F.scaled_dot_product_attention (what a flash-attention kernel replaces).

Family: attention. dtype: bfloat16.
Shapes: q, k, v, out [4, 16, 2048, 64]. FLOPs: 4 * 4 * 16 * 2048^2 * 64 = 69 GFLOP.
Bytes: 4 * 16 MiB = 67 MB. Compute-bound when fused.
q is drawn with std 2 so the attention is peaked and the output is not an average of ~2000 rows near 0.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
num_heads = 16
seq_len = 2048
head_dim = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=False)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    q = torch.randn(shape, dtype=torch.bfloat16) * 2.0
    k = torch.randn(shape, dtype=torch.bfloat16)
    v = torch.randn(shape, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return []
