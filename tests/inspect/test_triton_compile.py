"""Real Triton kernels compiled for sm_80, sm_90a and sm_100a without a GPU, and what their SASS shows."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import triton_kernels as K  # noqa: E402  (beside this file; see conftest.py)

from kernelwright.inspect import analyze_artifact, compile_for_arch, evaluate  # noqa: E402
from kernelwright.records import ProblemTraits, Severity  # noqa: E402

MATMUL_FP32 = ProblemTraits(dominant="matmul", compute_dtype="float32")
MATMUL_FP16 = ProblemTraits(dominant="matmul", compute_dtype="float16")
MEMORY_FP32 = ProblemTraits(dominant="memory", compute_dtype="float32")
PRECISION_OR_TENSOR_CODES = {"tf32-in-fp32", "fp16-in-fp32", "low-precision-mma", "mma-type-unknown",
                             "no-tensor-core", "legacy-mma-on-hopper", "legacy-mma-on-blackwell"}


def _matmul(dtype: torch.dtype, arch: str, precision: str = "ieee"):
    a = torch.zeros(128, 256, dtype=dtype)
    b = torch.zeros(256, 128, dtype=dtype)
    c = torch.empty(128, 128, dtype=torch.float32)
    args = (a, b, c, 128, 128, 256, 256, 128, 128)
    kwargs = dict(BM=64, BN=64, BK=32, PRECISION=precision, num_warps=4, num_stages=2)
    return compile_for_arch(K.matmul_kernel, args, kwargs, arch)


def test_fp16_dot_uses_each_archs_tensor_cores() -> None:
    expected = {"sm_80": ("mma", "HMMA.16816.F32"), "sm_90a": ("wgmma", "HGMMA.64x64x16.F32"),
                "sm_100a": ("tcgen05", "UTCHMMA")}
    for arch, (cls, opcode) in expected.items():
        artifact = _matmul(torch.float16, arch)
        assert artifact.arch == arch and artifact.num_warps == 4 and artifact.cubin[:4] == b"\x7fELF"
        summary = analyze_artifact(artifact)
        assert summary.histogram_by_class.get(cls, 0) > 0, (arch, summary.histogram_by_class)
        assert summary.histogram_by_opcode.get(opcode, 0) > 0, (arch, summary.histogram_by_opcode)
        assert summary.registers == artifact.n_regs > 0
        assert summary.threads_per_block == 128 and summary.threads_source == "launch"
        assert summary.shared_bytes == artifact.shared_bytes > 0  # Triton's dynamic shared memory counts
        assert summary.occupancy and summary.occupancy["blocks_per_sm"] > 0
        assert summary.distinctive[cls] is True
        # the ptxas log belongs to this very cubin: spills reported iff the SASS touches local memory
        assert bool(summary.spilled) == (summary.local_instructions > 0)
        assert not {f.code for f in evaluate([summary], MATMUL_FP16, arch)} & PRECISION_OR_TENSOR_CODES
    hopper = analyze_artifact(_matmul(torch.float16, "sm_90a"))
    assert hopper.mma_types == {"fp16": hopper.histogram_by_class["wgmma"]}
    assert hopper.distinctive["cp_async"] is True  # Triton pipelines with LDGSTS, not TMA (GPU_FACTS.md)
    assert hopper.distinctive["tma"] is False


def test_tf32_dot_in_fp32_problem_is_flagged_and_3xtf32_is_not_an_error() -> None:
    for arch in ("sm_80", "sm_90a", "sm_100a"):
        shortcut = analyze_artifact(_matmul(torch.float32, arch, "tf32"))
        findings = {f.code: f for f in evaluate([shortcut], MATMUL_FP32, arch)}
        assert findings["tf32-in-fp32"].severity is Severity.ERROR, arch
        emulated = analyze_artifact(_matmul(torch.float32, arch, "tf32x3"))
        severities = {f.code: f.severity for f in evaluate([emulated], MATMUL_FP32, arch)}
        assert severities.get("tf32-in-fp32") is Severity.NOTE, arch
    strict = analyze_artifact(_matmul(torch.float32, "sm_90a", "ieee"))
    assert strict.tensor_core_instructions == 0
    assert not {f.code for f in evaluate([strict], MATMUL_FP32, "sm_90a")} & PRECISION_OR_TENSOR_CODES


def test_fp16_operands_in_fp32_problem() -> None:
    summary = analyze_artifact(_matmul(torch.float16, "sm_80"))
    assert {f.code: f.severity for f in evaluate([summary], MATMUL_FP32, "sm_80")} == {
        "fp16-in-fp32": Severity.ERROR}


def test_vectorised_copy_shows_128_bit_accesses_and_misaligned_one_does_not() -> None:
    x = torch.zeros(8192)
    y = torch.empty_like(x)
    aligned = analyze_artifact(compile_for_arch(K.copy_kernel, (x, y, 8192), {"BLOCK": 1024}, "sm_90a"))
    assert set(aligned.global_load_bits) == {128} and set(aligned.global_store_bits) == {128}
    assert evaluate([aligned], MEMORY_FP32, "sm_90a") == []
    # pointers 4 bytes past a 16-byte boundary and an odd length: Triton cannot prove 16-byte alignment
    scalar = analyze_artifact(compile_for_arch(K.copy_kernel, (x[1:], y[1:], 8191), {"BLOCK": 1024}, "sm_90a"))
    assert set(scalar.global_load_bits) == {32}
    assert [f.code for f in evaluate([scalar], MEMORY_FP32, "sm_90a")] == ["scalar-global-access"]


def test_kernel_forced_to_spill_is_flagged() -> None:
    x = torch.zeros(8192)
    artifact = compile_for_arch(K.spill_kernel, (x, torch.empty_like(x)), {"BLOCK": 8192, "num_warps": 2}, "sm_90a")
    summary = analyze_artifact(artifact)
    assert artifact.n_spills > 0 and summary.spill_store_bytes and summary.local_instructions > 0
    findings = {f.code: f for f in evaluate([summary], MEMORY_FP32, "sm_90a")}
    assert findings["spills"].severity is Severity.WARNING
    assert findings["spills"].details["spill_store_bytes"] == summary.spill_store_bytes


def test_wrappers_apply_heuristics_and_autotune_configs() -> None:
    x = torch.zeros(4096)
    y = torch.empty_like(x)
    even = compile_for_arch(K.heuristic_copy_kernel, (x, y, 4096), {"BLOCK": 1024}, "sm_80")
    assert even.constexprs["EVEN"] == "True"
    tuned = compile_for_arch(K.autotuned_copy_kernel, (x, y, 4096), {}, "sm_80")
    assert tuned.num_warps == 2 and tuned.constexprs["BLOCK"] == "256"  # no launch yet: the first config
    K.autotuned_copy_kernel.best_config = K.autotuned_copy_kernel.configs[1]
    try:
        tuned = compile_for_arch(K.autotuned_copy_kernel, (x, y, 4096), {}, "sm_80")
    finally:
        del K.autotuned_copy_kernel.best_config
    assert tuned.num_warps == 8 and tuned.constexprs["BLOCK"] == "1024"


def test_repeated_compiles_are_served_from_memory() -> None:
    x = torch.zeros(4096)
    args = (x, torch.empty_like(x), 4096)
    first = compile_for_arch(K.copy_kernel, args, {"BLOCK": 512}, "sm_80")
    started = time.perf_counter()
    again = compile_for_arch(K.copy_kernel, args, {"BLOCK": 512}, "sm_80")
    assert again is first and time.perf_counter() - started < 0.05
    other = compile_for_arch(K.copy_kernel, args, {"BLOCK": 512}, "sm_90a")
    assert other is not first and other.arch == "sm_90a"


INTERPRETED = textwrap.dedent("""
    import sys
    import torch
    sys.path.insert(0, {here!r})
    import triton_kernels as K
    from kernelwright.inspect import analyze_artifact, compile_for_arch
    x = torch.randn(4096)
    y = torch.empty_like(x)
    # a launch under the interpreter leaves triton.language.core patched (helpers, tl.sum, tl.cdiv)
    K.scale_kernel[(4,)](x, y, 4096, 2.0, BLOCK=1024)
    assert torch.allclose(y, 2 * x), "the interpreter ran the kernel"
    a = torch.randn(64, 64, dtype=torch.float16)
    c = torch.empty(64, 64)
    K.matmul_kernel[(1, 1)](a, a, c, 64, 64, 64, 64, 64, 64, BM=64, BN=64, BK=32, PRECISION="ieee")
    assert type(K.scale_kernel).__name__ == "InterpretedFunction"
    s = analyze_artifact(compile_for_arch(K.scale_kernel, (x, y, 4096, 2.0), {{"BLOCK": 1024}}, "sm_90a"))
    m = analyze_artifact(compile_for_arch(K.matmul_kernel, (a, a, c, 64, 64, 64, 64, 64, 64),
                                          {{"BM": 64, "BN": 64, "BK": 32, "PRECISION": "ieee"}}, "sm_90a"))
    print(sorted(s.global_load_bits), s.histogram_by_class.get("sfu", 0) >= 0, m.histogram_by_class["wgmma"] > 0)
    # the interpreter still works afterwards
    K.scale_kernel[(4,)](x, y, 4096, 3.0, BLOCK=1024)
    assert torch.allclose(y, 3 * x)
""")


def test_compile_after_interpreted_launches(tmp_path: Path) -> None:
    script = tmp_path / "interpreted.py"
    script.write_text(INTERPRETED.format(here=str(Path(K.__file__).parent)))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[128] True True"
