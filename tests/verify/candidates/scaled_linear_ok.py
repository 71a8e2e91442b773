"""Linear + bias + scale fused in one Triton kernel; fp32 dot in IEEE precision (no TF32)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_scale_kernel(x_ptr, w_ptr, b_ptr, s_ptr, y_ptr, M, N, K,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    b = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    s = tl.load(s_ptr)
    y = (acc + b[None, :]) * s
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(()) + 0.5)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty(M, N, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
        linear_scale_kernel[grid](x, self.linear.weight, self.linear.bias, self.scale, y, M, N, K,
                                  BM=16, BN=16, BK=16)
        return y
