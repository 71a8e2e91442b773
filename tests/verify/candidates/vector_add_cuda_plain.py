"""a + b through load_inline, with the CUDA part free of torch headers (nvcc compiles it in about a second): the
host wrapper taking tensors is C++ in cpp_sources, the kernel and its launcher plain CUDA."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
__global__ void add_plain_kernel(const float* a, const float* b, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

void add_plain_launch(const float* a, const float* b, float* out, long n) {
    add_plain_kernel<<<(unsigned)((n + 255) / 256), 256>>>(a, b, out, n);
}
"""

CPP_SOURCE = r"""
void add_plain_launch(const float* a, const float* b, float* out, long n);

torch::Tensor add_plain(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    add_plain_launch(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), a.numel());
    return out;
}
"""

ext = load_inline("kw_add_plain", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE, functions=["add_plain"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.add_plain(a.contiguous(), b.contiguous())
