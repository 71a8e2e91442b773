"""C = A @ B in fp16, small enough for the Triton interpreter (KNOWN_HACKS #22's precision claim: fp16)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


m = 64
k = 64
n = 64


def get_inputs():
    return [torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)]


def get_init_inputs():
    return []
