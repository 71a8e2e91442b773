"""The job boundary (issue 41; KNOWN_HACKS.md rows 31-35): every attack on the channel, the process boundary and the
harness's code after the candidate's is rejected with the finding that names it; honest look-alikes pass.

The candidates come from ``boundary_corpus.py``, built afresh for each run with random names and written under
random file names, as in test_exploits.py. CPU cases run here under the Triton interpreter; the GPU case (``gpu``
marker) runs on the GPU machine. Until the boundary fix lands most of these fail: each case's comment in
boundary_corpus.py records the verdict the verifier gave before it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

import boundary_corpus as bc
import pytest

from kernelwright.config import config
from kernelwright.verify.records import VerifyOptions
from kernelwright.verify.verifier import verify

OUTLIVE_WAIT_S = 4.0  # how long after verify returns an escaped helper's marker must still not exist


def _verify(case, tmp_path: Path, device: str, **params):
    candidate = tmp_path / f"{secrets.token_hex(6)}.py"
    candidate.write_text(case.build(seed=secrets.randbelow(1 << 30), **params))
    options = {"compile_baseline": False, **case.options}
    return verify(case.problem, candidate, VerifyOptions(device=device, seed=2024, **options))


def _summary(verdict) -> str:
    found = sorted({f.code for f in verdict.findings})
    return f"{verdict.status} (clean={verdict.clean}): {verdict.message} | findings: {found}"


def _record(case_id: str, verdict) -> None:
    # One line per case for the record; visible with `pytest -s`.
    device = verdict.device.get("name", verdict.device.get("type"))
    print(f"\nCASE {case_id} [{device}] {_summary(verdict)[:400]}")


def _check(case: bc.BoundaryCase, verdict) -> None:
    found = {f.code for f in verdict.findings}
    summary = _summary(verdict)
    assert str(verdict.status) in case.allowed_statuses, summary
    if str(verdict.status) == "rejected":
        assert found & set(case.allowed_codes), summary
        # The one-line verdict names what was wrong.
        assert verdict.message.split(":")[0] in found, summary
    if case.clean is not None and str(verdict.status) == "passed":
        assert verdict.clean is case.clean, summary


@pytest.mark.parametrize("case", bc.cases(bc.CPU), ids=lambda c: c.id)
def test_cpu(case: bc.BoundaryCase, tmp_path: Path) -> None:
    verdict = _verify(case, tmp_path, "cpu")
    _record(case.id, verdict)
    _check(case, verdict)


@pytest.mark.gpu
@pytest.mark.parametrize("case", bc.cases(bc.GPU), ids=lambda c: c.id)
def test_gpu(case: bc.BoundaryCase, tmp_path: Path) -> None:
    verdict = _verify(case, tmp_path, "cuda")
    _record(case.id, verdict)
    _check(case, verdict)


# -- 33 escaped helper: a marker file, a private cache ------------------------------------------------------------
@pytest.fixture
def private_cache(tmp_path: Path):
    """A cache of this test's own (decoy results, Triton's cache), never the user's nor the session's."""
    cache = tmp_path / "cache"
    cache.mkdir()
    with config.scope(cache_dir=str(cache)):
        yield cache


@pytest.fixture
def escape_marker(tmp_path: Path):
    """Where an escaped helper writes its marker (and, beside it, its pid). Whatever outlived the test is ended
    here, by the pid it wrote — only if that process still runs the helper of this very marker."""
    marker = tmp_path / f"{secrets.token_hex(4)}.marker"
    yield marker
    pid_file = Path(f"{marker}.pid")
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if str(marker).encode() in cmdline.split(b"\0"):
            os.kill(pid, signal.SIGKILL)


def _wait_for(path: Path, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists():
            return True
        time.sleep(0.1)
    return path.exists()


def test_escaped_helper_ends_with_its_job(tmp_path: Path, private_cache: Path, escape_marker: Path) -> None:
    case = bc.case("escaped-helper")
    verdict = _verify(case, tmp_path, "cpu", marker=str(escape_marker), linger_s=0.0)
    outlived = _wait_for(escape_marker, OUTLIVE_WAIT_S)
    _record(case.id, verdict)
    print(f"CASE {case.id}: marker written {OUTLIVE_WAIT_S:.0f} s after the verdict: {outlived}")
    _check(case, verdict)
    assert not outlived, "a process the candidate started outlived its job and wrote its marker"


@pytest.mark.slow
def test_escaped_helper_cannot_poison_decoys(tmp_path: Path, private_cache: Path, escape_marker: Path) -> None:
    degenerate = bc.degenerate_case()
    first = _verify(degenerate, tmp_path, "cpu")
    _record("escaped-helper-poisons-decoys (degenerate, before)", first)
    assert "degenerate-problem" in {f.code for f in first.findings}, _summary(first)
    assert list((private_cache / "decoys").glob("*.json")), "the decoy result was not cached"

    case = bc.case("escaped-helper-poisons-decoys")
    escaping = _verify(case, tmp_path, "cpu", marker=str(escape_marker), linger_s=30.0)
    _record(case.id, escaping)
    outlived = _wait_for(escape_marker, OUTLIVE_WAIT_S)

    again = _verify(degenerate, tmp_path, "cpu")
    _record("escaped-helper-poisons-decoys (degenerate, after)", again)
    print(f"CASE {case.id}: marker written: {outlived}")
    assert "degenerate-problem" in {f.code for f in again.findings}, (
        f"after an escaped helper rewrote the decoy cache: {_summary(again)}")
    _check(case, escaping)
    assert not outlived, "a process the candidate started outlived its job and wrote its marker"


def test_boundary_corpus_covers_rows_31_to_36() -> None:
    rows = {c.exploit.split()[0] for c in bc.CASES if c.code}
    # Row 36 (dead instruction claim) needs executed instruction counts from a GPU profiler: it is the executed
    # evidence's (tests/verify/test_executed.py with a stand-in ncu; tests/verify/test_executed_gpu.py), not the
    # job boundary's.
    assert rows >= {"31", "32", "33", "34", "35"}
    assert {bc.PROTOCOL, bc.EVIDENCE, bc.HOOK, bc.PROCESS, bc.TIMER} <= {
        code for c in bc.CASES for code in c.allowed_codes}
    # Every case has a test: the parametrised ones, the GPU one, and the two end-to-end ones.
    assert {c.id for c in bc.cases(bc.CPU) + bc.cases(bc.GPU)} | set(bc.END_TO_END) == {c.id for c in bc.CASES}
    # Honest look-alikes exist for what the exploits do (print, start a process, a thread, a pipe of their own).
    assert len([c for c in bc.CASES if c.code is None and c.status == "passed"]) >= 4
