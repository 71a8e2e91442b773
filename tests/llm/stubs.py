"""Scripted candidates for the loop's tests: kernel files whose verdict a stub evaluator reads from a marker comment,
so the loop's logic (feedback, budgets, selection, resume) is tested fast; the real verifier has its own test.

A candidate carries ``# STUB <status> [ms=<median>] [<message>]``; the stub "verifies" it by reading that line."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

from kernelwright.jobs import Measurement
from kernelwright.records import Finding, Status
from kernelwright.verify.records import TrialOutcome, Verdict

MARK = re.compile(r"#\s*STUB\s+(\w+)(?:\s+ms=([\d.]+))?(?:\s+(.*))?")
EAGER_MS = 1.0


def kernel(status: str, ms: float | None = None, note: str = "", body: str = "return x * 2") -> str:
    """A complete candidate file with the stub marker."""
    mark = f"# STUB {status}" + (f" ms={ms}" if ms is not None else "") + (f" {note}" if note else "")
    return (f"{mark}\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            f"    def forward(self, x):\n        {body}\n")


def reply_with(source: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{source}```\n"


class StubEvaluator:
    """``verify`` reads the marker; every verification is appended to ``log`` (one sha per line), so a test can
    tell what was verified and how often — across processes, for the resume test."""

    timed = True

    def __init__(self, log: Path | None = None, delay_s: float = 0.0) -> None:
        self.log, self.delay_s = log, delay_s
        self.calls: list[tuple[str, bool]] = []

    def verify(self, candidate, *, compile_baseline: bool, deadline=None) -> Verdict:
        source = Path(candidate.path).read_text()
        sha = hashlib.sha256(source.encode()).hexdigest()
        if self.delay_s:
            time.sleep(self.delay_s)
        self.calls.append((sha, compile_baseline))
        if self.log is not None:
            with open(self.log, "a") as fh:
                fh.write(sha + "\n")
        match = MARK.search(source)
        status, ms, note = (match.group(1), match.group(2), match.group(3) or "") if match else ("crashed", None, "")
        return make_verdict(status, float(ms) if ms else None, note, sha, compile_baseline)


def measured(median_ms: float, *, q1_ms: float | None = None, q3_ms: float | None = None, min_ms: float | None = None,
             reps: int = 100) -> Measurement:
    """A measurement with the given median (the rest made consistent with it)."""
    return Measurement(median_ms=median_ms, min_ms=min_ms if min_ms is not None else median_ms,
                       q1_ms=q1_ms if q1_ms is not None else median_ms, q3_ms=q3_ms if q3_ms is not None else median_ms,
                       mean_ms=median_ms, reps=reps, host_ms_per_call=median_ms, flush_ms=0.0,
                       unexplained_ms_per_call=0.0)


def make_verdict(status: str, ms: float | None, note: str, sha: str, compile_baseline: bool = False) -> Verdict:
    common = dict(problem="p.py", candidate="c.py", problem_sha256="p" * 64, candidate_sha256=sha, seed=1,
                  device={"type": "cuda", "name": "stub"}, tolerance={"mode": "reference"})
    if status == "passed":
        timing = {"candidate": measured(ms), "eager": measured(EAGER_MS)}
        speedups = {"vs_eager": EAGER_MS / ms}
        if compile_baseline:
            timing["compile_max_autotune"] = measured(EAGER_MS * 0.8)
            speedups["vs_compile"] = EAGER_MS * 0.8 / ms
        return Verdict(status=Status.PASSED, message=f"correct on every trial; {ms} ms", clean=True,
                       timing=timing, speedups=speedups, **common)
    if status == "incorrect":
        comparison = {"output": 0, "ok": False, "max_abs_error": 3.0, "max_rel_error": 1.5, "worst_index": [1, 2],
                      "worst_got": 4.0, "worst_expected": 1.0, "wrong_fraction": 0.25,
                      "reason": "max abs error 3.0, max rel error 1.5 (worst at [1, 2]: got 4.0, expected 1.0); "
                                "25.00% of elements wrong"}
        trial = TrialOutcome(index=0, kind="random", seed=1, status="wrong", comparisons=(comparison,))
        return Verdict(status=Status.INCORRECT, message="incorrect: trial 0 (random): " + comparison["reason"],
                       clean=False, trials=(trial,), **common)
    if status == "rejected":
        code = note.split(":")[0] or "output-caching"
        finding = Finding(code=code, message=note or f"{code}: the candidate returned a cached output")
        return Verdict(status=Status.REJECTED, message=f"{code}: {finding.message}", clean=False,
                       findings=(finding,), **common)
    return Verdict(status=Status(status) if status in {s.value for s in Status} else Status.CRASHED,
                   message=note or status, clean=False, **common)
