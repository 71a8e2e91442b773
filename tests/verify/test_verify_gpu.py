"""The verifier on a real GPU: timing, baselines, profiler kernel lists, sticky CUDA errors. Marked `gpu`: run on
the GPU machine through the device tool (the results are recorded in docs/gpu-validation.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.records import Status
from kernelwright.verify.records import VerifyOptions
from kernelwright.verify.verifier import verify

HERE = Path(__file__).parent
SOFTMAX = HERE / "problems" / "softmax.py"
pytestmark = pytest.mark.gpu


@pytest.fixture
def run(candidate):
    def verify_on_gpu(name: str, problem: Path = SOFTMAX, **options):
        options.setdefault("compile_baseline", False)
        return verify(problem, candidate(name), VerifyOptions(device="cuda", seed=11, **options))

    return verify_on_gpu


def test_honest_kernel_is_timed_against_eager_with_a_profiled_kernel_list(run) -> None:
    verdict = run("softmax_ok.py")
    assert verdict.status is Status.PASSED, verdict.message
    cand, eager = verdict.timing["candidate"], verdict.timing["eager"]
    assert cand.reps >= 20 and cand.min_ms <= cand.median_ms <= cand.q3_ms
    assert verdict.speedups["vs_eager"] == pytest.approx(eager.median_ms / cand.median_ms)
    own = [k for k in verdict.kernels if k.origin == "own"]
    assert own and own[0].name.startswith("softmax_kernel") and (own[0].device_time_us or 0) > 0
    assert verdict.roofline is not None and verdict.roofline.physical_floor_ms > 0


def test_wrong_kernel_is_incorrect_on_the_gpu(run) -> None:
    verdict = run("softmax_wrong.py", timing=False)
    assert verdict.status is Status.INCORRECT


def test_illegal_address_is_a_runtime_error_and_the_next_verify_is_unharmed(run) -> None:
    verdict = run("softmax_illegal_address.py", timing=False)
    assert verdict.status in (Status.RUNTIME_ERROR, Status.CRASHED), verdict.message
    assert "illegal" in verdict.message.lower() or "cuda" in verdict.message.lower()
    assert run("softmax_ok.py", timing=False).status is Status.PASSED


def test_unwritten_output_shows_the_poison_on_the_gpu(run) -> None:
    verdict = run("softmax_partial.py", timing=False)
    assert verdict.status is Status.REJECTED
    assert any(f.code == "stale-memory" for f in verdict.findings)


def test_cuda_cpp_candidate_builds_runs_and_is_inspected(repo_root: Path) -> None:
    """A load_inline extension (KernelBench's CUDA C++ form) on the GPU: built for the device's arch in the child,
    timed, listed as the candidate's own kernel, and disassembled from the extension's shared object."""
    verdict = verify(repo_root / "problems" / "vector_add.py", repo_root / "examples" / "vector_add_cuda.py",
                     VerifyOptions(device="cuda", seed=11, compile_baseline=False))
    assert verdict.status is Status.PASSED, verdict.message
    own = [k for k in verdict.kernels if k.origin == "own"]
    assert any("add_f32x4_kernel" in k.name for k in own), verdict.kernels
    assert verdict.median_ms() > 0
    names = {i.name for i in verdict.instructions}
    assert any("add_f32x4_kernel" in n for n in names), names
