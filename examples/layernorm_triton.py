"""LayerNorm over the last dim in Triton, a candidate for problems/layernorm.py.

One program per row, fp32 statistics, two-pass variance (sum of (x - mean)^2, not E[x^2] - mean^2, which
cancels badly for rows with a large mean). A row of up to MAX_ONE_PASS columns is loaded once and kept in
registers; longer rows are streamed three times (mean, variance, normalise), the re-reads mostly hitting L2.
The parameters are created exactly as in the problem's Model (same module, same init calls, same order), so
the same seed gives the same weights and the state_dict keys match.
Block and warp choices are leads until timed on the H200 (eager 0.118 ms, torch.compile 0.070 ms for fp32
4096x8192 per GPU_FACTS.md).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ONE_PASS = 16384
LOOP_BLOCK = 4096


@triton.jit
def _layernorm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    n_cols,
    x_row_stride,
    y_row_stride,
    eps,
    BLOCK: tl.constexpr,
    ONE_PASS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    if ONE_PASS:
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        tl.store(y_row + cols, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / n_cols
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            xc = tl.where(mask, x - mean, 0.0)
            acc += xc * xc
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
            tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    block = triton.next_power_of_2(n_cols)
    one_pass = block <= MAX_ONE_PASS
    if not one_pass:
        block = LOOP_BLOCK
    num_warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    _layernorm_kernel[(n_rows,)](
        x,
        weight.contiguous(),
        bias.contiguous(),
        y,
        n_cols,
        n_cols,
        n_cols,
        eps,
        BLOCK=block,
        ONE_PASS=one_pass,
        num_warps=num_warps,
    )
    return y


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.norm.weight, self.norm.bias, self.norm.eps)
