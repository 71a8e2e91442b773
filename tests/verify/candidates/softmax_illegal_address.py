"""Stores far outside its output: an illegal memory access on a GPU (a sticky CUDA error)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bad_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + (1 << 40), tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        bad_kernel[(triton.cdiv(x.numel(), 256),)](y, x.numel(), BLOCK=256)
        return y
