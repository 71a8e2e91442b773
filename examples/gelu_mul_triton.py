"""Fused gelu(x) * y + 1 (exact erf GELU) in Triton, a candidate for problems/gelu_mul.py.

One read of x and y and one write, fp32 math whatever the storage dtype. BLOCK 2048 / 8 warps is a lead until
timed on the H200 (there eager takes 0.122 ms, torch.compile 0.053 ms, byte floor 0.047 ms for 16M fp32).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _gelu_mul_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    gelu = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, (gelu * y + 1.0).to(out_ptr.dtype.element_ty), mask=mask)


def gelu_mul_add_one(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if x.shape != y.shape:
        x, y = torch.broadcast_tensors(x, y)
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    n = x.numel()
    if n:
        _gelu_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return gelu_mul_add_one(x, y)
