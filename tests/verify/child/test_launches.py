"""Which kernels are the candidate's own: names as the profiler prints them, CUDA sources it compiled, Triton code
of installed libraries (the per-call accounting the parent judges is test_judging.py's)."""

from __future__ import annotations

from kernelwright.verify.child.launches import (
    LaunchRecorder,
    _installed_code,
    classify_device_kernels,
    qualified_name,
)


def test_profiler_names_reduce_to_their_scope_path() -> None:
    assert qualified_name("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
                          "(float*, float const*, int, int, int, bool const*, int, bool)") == (
        "(anonymous namespace)", "softmax_warp_forward")
    assert qualified_name("add_f32x4_kernel(float4 const*, float4 const*, float4*, long)") == ("add_f32x4_kernel",)
    assert qualified_name("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
                          "at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, "
                          "at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, "
                          "at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float> >"
                          "(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1})"
                          ) == ("at", "native", "elementwise_kernel")


def test_own_means_launched_or_compiled_not_merely_named() -> None:
    recorder = LaunchRecorder()
    recorder.record_cuda_sources(["namespace kw::ops { __global__ void scale(float* x) {} }",
                                  "namespace { __global__ void shift(float* x) {} }"])
    events = [
        ("void (anonymous namespace)::softmax_warp_forward<float>(float*)", 9.0, 7),  # PyTorch's
        ("void at::native::vectorized_elementwise_kernel<4>(int)", 1.0, 7),  # PyTorch's
        ("void kw::ops::scale<4>(float*)", 2.0, 7),
        ("void (anonymous namespace)::shift(float*)", 2.0, 7),
        ("row_softmax", 3.0, 7),  # a Triton kernel the recorder saw launched
        ("void", 1.0, 7),  # a jit function named `void`: exact names only
    ]
    kinds = {k.name: k.origin for k in classify_device_kernels(
        events, {"row_softmax", "native", "anonymous", "void"}, recorder.cuda_functions, recorder.cuda_namespaces)}
    assert kinds["void (anonymous namespace)::softmax_warp_forward<float>(float*)"] == "library"
    assert kinds["void at::native::vectorized_elementwise_kernel<4>(int)"] == "library"
    assert kinds["void kw::ops::scale<4>(float*)"] == "own"
    assert kinds["void (anonymous namespace)::shift(float*)"] == "own"
    assert kinds["row_softmax"] == "own"


def test_triton_code_of_installed_packages_is_library_code() -> None:
    scope: dict = {}
    exec(compile("def kernel(x):\n    return x\n", "/opt/env/lib/python3.12/site-packages/liger/ops.py", "exec"),
         scope)
    assert _installed_code(scope["kernel"])

    def mine(x):
        return x

    assert not _installed_code(mine)

