"""The Deadline record: a budget's end, the same object from the command line to the child job."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from kernelwright.deadline import NO_DEADLINE, Deadline


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


def test_left_cap_share_and_extension(clock: list[float]) -> None:
    d = Deadline.after(50.0)
    assert d.at == 150.0 and d.left() == 50.0 and not d.expired()
    assert d.cap(600.0) == 50.0 and d.cap(10.0) == 10.0 and d.limits(600.0) and not d.limits(10.0)
    assert d.share(0.6).at == pytest.approx(130.0)  # 60% of what is left, from now
    clock[0] = 140.0
    assert d.share(0.5).at == pytest.approx(145.0)
    assert d.extended(100.0).at == 250.0 and d.not_before(160.0).at == 160.0 and d.not_before(120.0) == d
    assert d.earliest(Deadline(120.0)).at == 120.0 and d.earliest(NO_DEADLINE) is d
    assert d.expired(margin_s=10.0) and not d.expired(margin_s=9.0)
    clock[0] = 151.0
    assert d.expired() and d.left() == 0.0 and d.cap(600.0, at_least_s=1.0) == 1.0


def test_no_deadline_leaves_everything_as_it_is(clock: list[float]) -> None:
    for d in (NO_DEADLINE, Deadline.after(None), Deadline.of(None)):
        assert not d.bounded and d.left() == math.inf and not d.expired(margin_s=1e9)
        assert d.cap(600.0) == 600.0 and not d.limits(600.0)
        assert d.share(0.5) is d and d.extended(5.0) is d
    assert Deadline.of(130.0) == Deadline(130.0) and Deadline.of(Deadline(1.0)) == Deadline(1.0)
    with pytest.raises(TypeError, match="a deadline is"):
        Deadline.of("soon")  # type: ignore[arg-type]


def test_verify_options_take_an_instant_as_a_deadline() -> None:
    from kernelwright.verify.records import VerifyOptions

    assert VerifyOptions(deadline=5.0).deadline == Deadline(5.0)
    assert VerifyOptions().deadline is NO_DEADLINE


def test_a_child_killed_at_the_deadline_is_a_budget_cut(tmp_path: Path) -> None:
    """run_child cuts the job's own limit to the caller's deadline, and says when the deadline is what ended it."""
    from kernelwright.isolation.process import run_child

    problem = tmp_path / "slow.py"
    problem.write_text("import time, torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                       "        time.sleep(60)\n        return x\n"
                       "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")
    spec = {"problem": str(problem), "device": "cpu", "max_elements": 1 << 18}
    started = time.monotonic()
    run = run_child("probe", spec, workdir=tmp_path / "work", timeout_s=120, device="cpu",
                    deadline=Deadline.after(3.0))
    assert run.timed_out and run.budget_cut and time.monotonic() - started < 30
