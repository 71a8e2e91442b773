"""Per-token cross-entropy of language-model logits: out[i] = logsumexp(logits[i]) - logits[i, target[i]].

Family: row reduction with a gather. dtype: float32 logits, int64 targets, float32 out.
Shapes: logits [4096, 32000] (500 MiB), targets [4096], out [4096]. Bytes: 524 MB. FLOPs: about 4 per logit.
reduction='none' on purpose: a scalar mean would let a kernel that samples a fraction of the rows pass a
loose tolerance; per-row losses expose every row.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
vocab = 32000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="none")


def get_inputs():
    logits = torch.randn(batch_size, vocab) * 2.0
    targets = torch.randint(0, vocab, (batch_size,))
    return [logits, targets]


def get_init_inputs():
    return []
