"""Causal self-attention written out as matmul -> mask -> softmax -> matmul.

Family: attention. dtype: float16.
Shapes: q, k, v, out [4, 16, 2048, 64] (batch, heads, seq, head_dim).
FLOPs: 4 * 4 * 16 * 2048^2 * 64 = 69 GFLOP as written (half of it is masked away; a fused kernel needs ~34).
Bytes: 4 * 16 MiB = 67 MB if the [2048, 2048] scores never leave the chip (eager writes 537 MB of them).
q is drawn with std 2 so the logits have std 2 and the attention is peaked, as in a trained model; with unit
inputs the late rows would average ~2000 rows of v and sit near 0.
"""

import torch
import torch.nn as nn

batch_size = 4
num_heads = 16
seq_len = 2048
head_dim = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        length = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        mask = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    q = torch.randn(shape, dtype=torch.float16) * 2.0
    k = torch.randn(shape, dtype=torch.float16)
    v = torch.randn(shape, dtype=torch.float16)
    return [q, k, v]


def get_init_inputs():
    return []
