"""Greedy decoding step: out = argmax(logits, dim=-1) as int64.

Family: row reduction with an index result. dtype: float32 in, int64 out.
Shapes: logits [4096, 32000] (500 MiB), out [4096]. Bytes: 524 MB. FLOPs: 131 M comparisons.
Ties are vanishingly rare with continuous random fp32 inputs, so the answer is unique.
"""

import torch
import torch.nn as nn

batch_size = 4096
vocab = 32000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.argmax(logits, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, vocab)]


def get_init_inputs():
    return []
