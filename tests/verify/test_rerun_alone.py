"""Issue 43: a job that runs out of memory beside other jobs of a parallel run (the GPU lock on) runs again alone,
and only that run is judged — a neighbour's memory is never charged to the candidate. A candidate that runs out of
memory alone too keeps its runtime_error.

The candidates here cannot see their neighbours' memory on the CPU, so they stand in for it: each tries to share the
run's lock file, which fails only while its own job holds the lock exclusively (alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.records import Status
from kernelwright.verify.records import VerifyOptions
from kernelwright.verify.verifier import verify

HERE = Path(__file__).resolve().parent
SOFTMAX = HERE / "problems" / "softmax.py"

_OUT_OF_MEMORY_BESIDE_OTHERS = '''
import fcntl, os


def _alone() -> bool:
    fd = os.open(os.environ["KERNELWRIGHT_GPU_LOCK"], os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True  # the job holds the lock exclusively: nothing runs beside it
    finally:
        os.close(fd)
    return False


def _allocate():
    if {always} or not _alone():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 3.1 GiB free)")
'''


def _candidate(tmp_path: Path, *, always: bool) -> Path:
    source = (HERE / "candidates" / "softmax_ok.py").read_text()
    source += _OUT_OF_MEMORY_BESIDE_OTHERS.format(always=always)
    source = source.replace("        x = x.contiguous()\n", "        _allocate()\n        x = x.contiguous()\n", 1)
    path = tmp_path / "softmax_memory.py"
    path.write_text(source)
    return path


@pytest.fixture
def beside_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU lock a parallel bench sets for its workers (and their children inherit)."""
    monkeypatch.setenv("KERNELWRIGHT_GPU_LOCK", str(tmp_path / "gpu.lock"))


def test_out_of_memory_beside_others_runs_again_alone_and_passes(tmp_path: Path, beside_others: None) -> None:
    verdict = verify(SOFTMAX, _candidate(tmp_path, always=False), VerifyOptions(device="cpu", seed=5))
    assert verdict.status is Status.PASSED, verdict.message
    assert verdict.has_finding("rerun-alone")
    assert all(t.status == "ok" for t in verdict.trials if t.status != "skipped")


def test_out_of_memory_alone_too_is_the_candidates_runtime_error(tmp_path: Path, beside_others: None) -> None:
    verdict = verify(SOFTMAX, _candidate(tmp_path, always=True), VerifyOptions(device="cpu", seed=5))
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    assert verdict.has_finding("out-of-memory") and verdict.has_finding("rerun-alone")


def test_without_neighbours_an_out_of_memory_is_not_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.delenv("KERNELWRIGHT_GPU_LOCK", raising=False)
    source = _candidate(tmp_path, always=True).read_text().replace(
        'os.environ["KERNELWRIGHT_GPU_LOCK"]', '"/nonexistent"')
    path = tmp_path / "softmax_memory_alone.py"
    path.write_text(source)
    verdict = verify(SOFTMAX, path, VerifyOptions(device="cpu", seed=5))
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    assert not verdict.has_finding("rerun-alone")
