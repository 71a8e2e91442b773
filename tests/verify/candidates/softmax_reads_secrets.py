"""Honest softmax that refuses to run if it can see an API key: the verifier must have removed them."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

LEAKED = sorted(k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN")) or "SECRET" in k)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        if LEAKED:
            raise RuntimeError(f"credentials visible to the candidate: {LEAKED}")
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
