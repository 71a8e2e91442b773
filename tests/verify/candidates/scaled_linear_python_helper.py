"""scaled_linear with a plain Python helper called inside the kernel: correct under the interpreter, which runs
the kernel as Python, but Triton's compiler refuses it (a cross-compile failure, a warning on a CPU pass)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def halve(v):  # a plain Python function: the interpreter calls it, Triton's compiler refuses it
    return v * 0.5


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, s_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
    acc = tl.dot(a, b, input_precision="ieee")
    acc = halve((acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]) * tl.load(s_ptr) * 2.0)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(()) + 0.5)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty(M, N, device=x.device, dtype=torch.float32)
        linear_kernel[(1,)](x, self.linear.weight, self.linear.bias, self.scale, y, M, N, K,
                            BLOCK_M=triton.next_power_of_2(M), BLOCK_N=triton.next_power_of_2(N),
                            BLOCK_K=triton.next_power_of_2(K))
        return y
