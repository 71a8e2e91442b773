"""Log-softmax over a vocabulary-sized last dim: out = log_softmax(x, dim=-1).

Family: row reduction. dtype: bfloat16 (math in fp32 is expected; output rounded to bf16).
Shapes: x, out [4096, 32000] (a language-model logits tensor; 32000 is not a power of two).
Bytes: 2 * 2 * 4096 * 32000 = 524 MB. FLOPs: about 5 per element.
"""

import torch
import torch.nn as nn

batch_size = 4096
vocab = 32000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, vocab, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
