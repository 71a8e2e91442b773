"""Elementwise fp32 add as CUDA C++ through torch.utils.cpp_extension.load_inline, for problems/vector_add.py.

The kernel reads and writes float4 (128-bit, LDG.E.128/STG.E.128) when all three pointers are 16-byte aligned,
with a scalar loop for the last n % 4 elements, and falls back to a scalar grid-stride loop otherwise.
The extension is built at import (as KernelBench solutions do) for the GPU that is present: the -gencode
comes from torch.cuda.get_device_capability(), with the "a" suffix for sm_90 (arch-specific Hopper features;
not needed by this kernel, but it is what kernelwright's inspection expects for an H200) and sm_90a as the
fallback when no GPU is visible. Launch shape (256 threads, up to 32 blocks per SM, grid-stride) is a lead
until timed on the H200.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <algorithm>
#include <cstdint>

__global__ void add_f32x4_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                 float4* __restrict__ out, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 x = a[i];
        const float4 y = b[i];
        out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}

__global__ void add_f32_kernel(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ out, int64_t begin, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i] + b[i];
    }
}

static bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

torch::Tensor vector_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "vector_add: inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat,
                "vector_add: inputs must be float32");
    TORCH_CHECK(a.sizes() == b.sizes(), "vector_add: inputs must have the same shape");
    const c10::cuda::CUDAGuard device_guard(a.device());
    a = a.contiguous();
    b = b.contiguous();
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    if (n == 0) return out;

    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int threads = 256;
    int sms = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, a.get_device()));
    const int64_t max_blocks = (int64_t)sms * 32;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();

    int64_t begin = 0;
    if (aligned16(pa) && aligned16(pb) && aligned16(po)) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            const int64_t blocks = std::min((n4 + threads - 1) / threads, max_blocks);
            add_f32x4_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
                reinterpret_cast<const float4*>(pa), reinterpret_cast<const float4*>(pb),
                reinterpret_cast<float4*>(po), n4);
        }
        begin = n4 * 4;
    }
    if (begin < n) {
        const int64_t blocks = std::min((n - begin + threads - 1) / threads, max_blocks);
        add_f32_kernel<<<(unsigned)blocks, threads, 0, stream>>>(pa, pb, po, begin, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SOURCE = "torch::Tensor vector_add(torch::Tensor a, torch::Tensor b);"


def _gencode() -> str:
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")
    else:
        arch = "90a"
    return f"-gencode=arch=compute_{arch},code=sm_{arch}"


_ext = load_inline(
    name="kernelwright_example_vector_add",
    cpp_sources=[CPP_SOURCE],
    cuda_sources=[CUDA_SOURCE],
    functions=["vector_add"],
    extra_cuda_cflags=["-O3", _gencode()],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.vector_add(a, b)
