"""CUDA C++ and PTX compiled with nvcc/ptxas for several archs (no GPU), then analysed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelwright.config import config
from kernelwright.errors import ToolchainError
from kernelwright.inspect import sass, tools
from kernelwright.inspect.analysis import analyze_binary, analyze_cubin
from kernelwright.inspect.cuda_compile import compile_cuda, compile_ptx, torch_include_dirs
from kernelwright.inspect.expectations import evaluate
from kernelwright.records import ProblemTraits, Severity


def _has(tool: str) -> bool:
    try:
        tools.tools_for(tool)
    except ToolchainError:
        return False
    return True


needs_nvcc = pytest.mark.skipif(not _has("nvcc"), reason="nvcc not installed")


@needs_nvcc
@pytest.mark.parametrize("arch,opcode", [("sm_80", "HMMA.16816.F32"), ("sm_90a", "HMMA.16816.F32")])
def test_wmma_kernel_compiles_and_shows_hmma(data_dir: Path, arch: str, opcode: str) -> None:
    result = compile_cuda((data_dir / "wmma.cu").read_text(), arch=arch, torch_headers=False)
    assert result.ok and result.cubin[:4] == b"\x7fELF" and ".entry wmma_gemm" in result.ptx
    assert result.resources["wmma_gemm"]["registers"] > 0
    summaries = {s.name: s for s in analyze_cubin(result.cubin, arch=arch, ptxas_log=result.full_log, ptx=result.ptx)}
    wmma = summaries["wmma_gemm"]
    assert wmma.histogram_by_opcode.get(opcode, 0) > 0 and wmma.mma_types == {"fp16": wmma.tensor_core_instructions}
    assert wmma.threads_per_block == 128 and wmma.threads_source == "launch_bounds"
    assert summaries["local_array"].spilled is False and summaries["local_array"].local_instructions > 0
    findings = {f.code: f.severity for f in evaluate(list(summaries.values()),
                                                      ProblemTraits(dominant="matmul", compute_dtype="float16"), arch)}
    assert findings == ({"legacy-mma-on-hopper": Severity.WARNING} if arch == "sm_90a" else {})


@needs_nvcc
def test_compile_error_is_a_result_with_the_error_line(tmp_path: Path) -> None:
    source = "__global__ void broken(float* x) { x[threadIdx.x] = undefined_name; }\n"
    result = compile_cuda(source, arch="sm_80", torch_headers=False)
    assert not result.ok and result.cubin == b""
    assert "undefined_name" in result.log and "error" in result.log
    assert "/tmp/" not in result.log  # the scratch directory is not part of the message


@needs_nvcc
def test_results_are_cached_by_content(data_dir: Path) -> None:
    source = (data_dir / "wmma.cu").read_text()
    first = compile_cuda(source, arch="sm_80", torch_headers=False)
    again = compile_cuda(source, arch="sm_80", torch_headers=False)
    assert again.cached and again.cubin == first.cubin and again.ptx == first.ptx


def test_ptx_with_serialized_wgmma_is_flagged(data_dir: Path) -> None:
    result = compile_ptx((data_dir / "wgmma_serialized.ptx").read_text(), "sm_90a")
    assert result.ok, result.full_log
    assert "-c" in result.command  # the extern call makes it relocatable
    [summary] = analyze_cubin(result.cubin, arch="sm_90a", ptxas_log=result.full_log, ptx=result.ptx)
    assert summary.histogram_by_class["wgmma"] == 2
    findings = {f.code: f for f in evaluate([summary], ProblemTraits(dominant="matmul", compute_dtype="float16"),
                                             "sm_90a")}
    assert findings["wgmma-serialized"].severity is Severity.WARNING
    assert "serialized" in findings["wgmma-serialized"].details["warnings"][0]["message"]


def test_arch_the_toolchain_cannot_target_names_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    only_13 = (tools.Tool(name="nvcc", path=Path("/usr/bin/true"), version=(13, 0)),)
    monkeypatch.setattr(tools, "all_tools", lambda name: only_13)
    with pytest.raises(ToolchainError) as info:
        compile_cuda("__global__ void k() {}", arch="sm_70", torch_headers=False)
    assert "sm_70 needs CUDA 9.0 to 12.9 tools" in str(info.value) and "nvcc 13.0" in str(info.value)


def test_torch_include_dirs_found_without_importing_torch() -> None:
    pytest.importorskip("torch")
    dirs = torch_include_dirs()
    assert any((d / "torch" / "extension.h").is_file() for d in dirs)


# Source with the torch headers (80 s of nvcc on 2 cores) is compiled and its SASS read by
# tests/verify/test_verify_cpu.py::test_cuda_cpp_without_a_gpu_is_compiled_inspected_and_unsupported, through the same
# compile_cuda(torch_headers=True): not compiled twice in one suite.


@needs_nvcc
def test_a_binary_for_several_archs_is_read_image_by_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Extensions are often built for an arch list; one cuobjdump rarely reads every image (CUDA 13 stops at
    sm_70), and an image no tool here can read must not hide the others."""
    source = tmp_path / "k.cu"
    source.write_text('extern "C" __global__ void twice(const float* x, float* y, int n) {\n'
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 2.0f * x[i];\n}\n")
    fatbin = tmp_path / "k.fatbin"
    subprocess.run(["nvcc", "-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                    "arch=compute_90a,code=sm_90a", str(source), "-o", str(fatbin)], check=True, capture_output=True)
    both = analyze_binary(fatbin)
    assert sorted(k.arch for k in both) == ["sm_80", "sm_90a"]
    sass._DISASSEMBLY_CACHE.clear()  # and a cache folder of its own below: the same file is disassembled again
    real = tools.supports
    monkeypatch.setattr(tools, "supports", lambda tool, arch: not arch.startswith("sm_80") and real(tool, arch))
    with config.scope(cache_dir=str(tmp_path / "another-cache")):
        left = analyze_binary(fatbin)
    assert [k.arch for k in left] == ["sm_90a"] and left[0].name == "twice"
