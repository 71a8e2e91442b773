"""A verify given a deadline (a search's or a bench's budget) ends by it, and its verdict says the budget did it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kernelwright.verify.records import VerifyOptions
from kernelwright.verify.verifier import verify

HERE = Path(__file__).parent
SOFTMAX = HERE / "problems" / "softmax.py"
SLOW = '''import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(120)
        return torch.softmax(x, dim=-1)
'''


def test_no_time_left_is_a_timeout_verdict_before_anything_runs(tmp_path: Path) -> None:
    started = time.monotonic()
    progress = tmp_path / "progress.jsonl"
    verdict = verify(SOFTMAX, HERE / "candidates" / "softmax_ok.py",
                     VerifyOptions(device="cpu", seed=1, deadline=time.monotonic() - 1, progress_file=str(progress)))
    assert str(verdict.status) == "timeout" and "budget ran out before the reference job" in verdict.message
    assert [f.code for f in verdict.findings] == ["budget-spent"]
    assert time.monotonic() - started < 30  # no child started (the events below say so); 5 s flaked on a loaded machine
    # The progress file says which step the budget stopped.
    events = [(x["phase"], x["event"]) for x in map(json.loads, progress.read_text().splitlines())]
    assert events == [("verify", "start"), ("reference", "start"), ("reference", "stopped")]


@pytest.mark.slow
def test_a_deadline_cuts_the_candidate_and_the_verdict_names_the_budget(tmp_path: Path) -> None:
    candidate = tmp_path / "slow.py"
    candidate.write_text(SLOW)
    started = time.monotonic()
    verdict = verify(SOFTMAX, candidate, VerifyOptions(device="cpu", seed=1, deadline=started + 12))
    elapsed = time.monotonic() - started
    assert str(verdict.status) == "timeout" and "budget ran out" in verdict.message, verdict.message
    assert elapsed < 30, elapsed  # the deadline plus the child's teardown, not the candidate's 120 s sleeps
