"""A reference with redundant work: eight identity multiplications before a softmax. Eager runs nine kernels,
torch.compile one, so a speedup over eager alone overstates any candidate (KNOWN_HACKS #18)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        for _ in range(8):
            x = x * 1.0
        return torch.softmax(x, dim=-1)


rows = 4096
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
