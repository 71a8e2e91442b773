"""Binaries: fatbins with several archs, CUDA extension shared objects, cubins from another toolchain."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelwright.errors import InputError, ToolchainError
from kernelwright.inspect import sass, tools
from kernelwright.inspect.analysis import analyze_binary, analyze_cubin, ptx_entries, ptx_mma_types


def _nvcc() -> Path | None:
    try:
        return tools.find_tool("nvcc")
    except ToolchainError:
        return None


needs_nvcc = pytest.mark.skipif(_nvcc() is None, reason="nvcc not installed")


@pytest.fixture(scope="module")
def shared_object(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A shared object like a torch CUDA extension: host code plus an embedded fatbin for sm_80 and sm_90a."""
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc not installed")
    out = tmp_path_factory.mktemp("so") / "libkw_ext.so"
    subprocess.run([str(nvcc), "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_80,code=sm_80",
                    "-gencode", "arch=compute_90a,code=sm_90a", "-o", str(out), str(data_dir / "wmma.cu")],
                   check=True, capture_output=True, timeout=300)
    return out


@needs_nvcc
def test_shared_object_kernels_for_every_arch(shared_object: Path) -> None:
    summaries = analyze_binary(shared_object)
    assert {(s.arch, s.name) for s in summaries} >= {("sm_80", "wmma_gemm"), ("sm_90a", "wmma_gemm"),
                                                      ("sm_80", "scalar_copy"), ("sm_90a", "local_array")}
    assert all(s.origin == "shared-object" for s in summaries)
    only_hopper = analyze_binary(shared_object, arch="sm_90a", name="wmma_gemm")
    assert [(s.arch, s.threads_per_block) for s in only_hopper] == [("sm_90a", 128)]
    assert only_hopper[0].spilled is None  # no ptxas log for a shipped binary
    with pytest.raises(InputError, match="no SASS for sm_100a"):
        analyze_binary(shared_object, arch="sm_100a")
    with pytest.raises(InputError, match="no kernel named"):
        analyze_binary(shared_object, arch="sm_80", name="missing")


@needs_nvcc
def test_scalar_copy_access_width(shared_object: Path) -> None:
    [copy] = analyze_binary(shared_object, arch="sm_80", name="scalar_copy")
    assert copy.global_load_bits == {32: 1} and copy.global_store_bits == {32: 1}


def test_static_shared_excludes_the_reserved_kib_on_hopper() -> None:
    function = sass.SassFunction(name="k", arch="sm_90a", instructions=(),
                                 resources=sass.Resources(registers=10, shared_bytes=5120))
    from kernelwright.inspect.analysis import summarize_function

    summary = summarize_function(function, origin="test", tool="t", threads_per_block=256)
    assert summary.static_shared_bytes == 4096
    ampere = sass.SassFunction(name="k", arch="sm_80", instructions=(),
                               resources=sass.Resources(registers=10, shared_bytes=4096))
    assert summarize_function(ampere, origin="test", tool="t").static_shared_bytes == 4096


def test_volta_cubin_needs_a_cuda_12_disassembler(tmp_path: Path) -> None:
    """cuobjdump 13.x prints "SM70 is deprecated" and exits 0; a 12.x copy must be picked, or the error must say
    which release is needed."""
    triton = pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    import triton_kernels as K

    from kernelwright.inspect import compile_for_arch

    try:
        artifact = compile_for_arch(K.copy_kernel, (torch.zeros(1024), torch.zeros(1024), 1024), {"BLOCK": 256},
                                    "sm_70")
    except Exception as exc:  # this Triton or its ptxas cannot target Volta
        pytest.skip(f"triton {triton.__version__} cannot compile for sm_70: {type(exc).__name__}")
    usable = [t for t in tools.all_tools("cuobjdump") if tools.supports(t, "sm_70")]
    if usable:
        [summary] = analyze_cubin(artifact.cubin, arch="sm_70")
        assert summary.instruction_count > 0 and summary.tool.startswith("cuobjdump 12.")
        [found] = analyze_cubin(artifact.cubin)  # the arch is read from the ELF header
        assert found.arch == "sm_70"
    else:
        with pytest.raises(ToolchainError, match=r"sm_70 needs CUDA 9\.0 to 12\.9 tools"):
            analyze_cubin(artifact.cubin)


def test_ptx_helpers() -> None:
    ptx = """
.visible .entry first(
{
  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1}, {%r1}, {%r2}, {%f1};
  wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%f1}, %rd1, %rd2, 1, 1, 1;
}
.visible .entry second(
{
  wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f1}, {%r1}, {%r2}, {%f1};
  tcgen05.mma.cta_group::1.kind::f8f6f4 [%r1], %rd1, %rd2, %r2, 1;
}
"""
    entries = ptx_entries(ptx)
    assert list(entries) == ["first", "second"]
    assert ptx_mma_types(entries["first"]) == {"bf16": 1, "tf32": 1}
    assert ptx_mma_types(entries["second"]) == {"fp16": 1, "fp8|fp6|fp4": 1}
