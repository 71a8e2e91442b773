"""The clock a job's limit runs on: real time kills a job that outlives its limit; a held clock runs out only where
a test's rule says, on what the job reported."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from kernelwright.isolation import clock
from kernelwright.isolation.process import run_child

SLEEPY_PROBLEM = ("import time, torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                  "        time.sleep(60)\n        return x\n"
                  "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")


def _probe(tmp_path: Path, body: str, **kwargs):
    problem = tmp_path / "problem.py"
    problem.write_text(body)
    spec = {"problem": str(problem), "device": "cpu", "max_elements": 1 << 18}
    return run_child("probe", spec, workdir=tmp_path / "work", device="cpu", **kwargs)


def test_the_wall_clock_ends_a_job_that_outlives_its_limit(tmp_path: Path) -> None:
    started = time.monotonic()
    run = _probe(tmp_path, SLEEPY_PROBLEM, timeout_s=2.0)
    assert run.timed_out and not run.budget_cut
    assert time.monotonic() - started < 40  # the 60 s sleep was not waited for


class _Running:
    """A process that never ends by itself (what HeldClock waits on)."""

    def __init__(self, ends_after: int | None = None) -> None:
        self.waits = 0
        self.ends_after = ends_after

    def wait(self, timeout: float | None = None) -> int:
        self.waits += 1
        if self.ends_after is not None and self.waits >= self.ends_after:
            return 0
        raise subprocess.TimeoutExpired("job", timeout or 0)


def test_a_held_clock_runs_out_on_its_rule_and_not_before() -> None:
    messages: list[dict] = [{"event": "trial_start", "index": 0, "kind": "random"}]
    rule = clock.at_message("candidate", "trial_start", index=1)
    held = clock.HeldClock(rule, poll_s=0.001, give_up_s=0.2)
    # the rule never fires for this job: only the real-time safety net ends it
    assert held.wait(_Running(), job="candidate", limit_s=0.0, messages=messages)
    assert not rule("candidate", messages) and not rule("reference", [*messages, {"event": "trial_start", "index": 1}])
    messages.append({"event": "trial_start", "index": 1, "kind": "random"})
    assert rule("candidate", messages)
    proc = _Running()
    assert held.wait(proc, job="candidate", limit_s=0.0, messages=messages) and proc.waits == 1
    # a job that ends by itself is not a timeout, whatever its limit said
    assert not clock.HeldClock(poll_s=0.001).wait(_Running(ends_after=3), job="x", limit_s=0.0, messages=[])
    assert held.ran_out == ["candidate", "candidate"]


def test_honest_work_on_a_held_clock_never_runs_out(tmp_path: Path) -> None:
    quick = SLEEPY_PROBLEM.replace("time.sleep(60)", "time.sleep(0.3)")  # the probe calls forward a few times
    with clock.holding(clock.HeldClock()) as held:
        run = _probe(tmp_path, quick, timeout_s=0.1)  # a limit the work outlives in real time
    assert not run.timed_out and run.returncode == 0, run.describe_exit()
    assert held.ran_out == [] and clock.current() is not held
