"""Jobs forked from a warm zygote (isolation/zygote.py): they start without the imports, inherit nothing of an
earlier job, and a zygote that dies or cannot start costs no job (the job starts in a fresh interpreter)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from kernelwright.config import config
from kernelwright.isolation import zygote
from kernelwright.isolation.process import job_environment, run_child, scrubbed_environment
from kernelwright.jobs import ProbeResult


@pytest.fixture(autouse=True)
def _zygotes_on():
    with config.scope(job_zygote=True):
        yield


@pytest.fixture
def fresh_zygotes():
    """For a test that kills or replaces zygotes: none before it, none left after it."""
    zygote.discard_zygotes()
    yield
    zygote.discard_zygotes()


def _problem(tmp_path: Path, name: str, top: str = "", body: str = "return x * 2") -> Path:
    problem = tmp_path / f"{name}.py"
    problem.write_text(f"import torch\n{top}\nclass Model(torch.nn.Module):\n"
                       f"    def forward(self, x):\n        {body}\n"
                       "def get_inputs():\n    return [torch.randn(4)]\n"
                       "def get_init_inputs():\n    return []\n")
    return problem


def _probe(problem: Path, work: Path, timeout_s: float = 120):
    return run_child("probe", {"problem": str(problem), "device": "cpu"}, workdir=work, timeout_s=timeout_s,
                     device="cpu")


def _cpu_zygote() -> zygote.Zygote:
    return zygote.zygote_for(scrubbed_environment(job_environment("cpu")))


def test_a_forked_job_inherits_nothing_of_the_job_before(tmp_path: Path) -> None:
    """One job sets a global on torch (a module the zygote holds), leaves a file open and a thread running; the
    next job, forked from the same zygote, sees none of them."""
    leak = tmp_path / "leak.txt"
    first = _problem(tmp_path, "first", top=f"""
import os, threading, time
torch.kernelwright_marker = "set by the first job"
leaked = open({str(leak)!r}, "w")
print("LEAKED-FD", leaked.fileno(), flush=True)
threading.Thread(target=time.sleep, args=(60,), daemon=True, name="first-job-thread").start()
""")
    run = _probe(first, tmp_path / "w1")
    assert run.finished and run.forked, run.stderr_tail
    fd = int(run.stdout_tail.split("LEAKED-FD")[1].split()[0])
    second = _problem(tmp_path, "second", top=f"""
import os, threading
print("MARKER", getattr(torch, "kernelwright_marker", None), flush=True)
try:
    print("FD", os.readlink(f"/proc/self/fd/{fd}"), flush=True)
except OSError:
    print("FD closed", flush=True)
print("THREADS", sorted(t.name for t in threading.enumerate()), flush=True)
""")
    again = _probe(second, tmp_path / "w2")
    assert again.finished and again.forked, again.stderr_tail
    out = again.stdout_tail
    assert "MARKER None" in out, out
    assert ("FD closed" in out or "FD /" in out) and str(leak) not in out, out
    assert "first-job-thread" not in out, out


def test_jobs_whose_environments_differ_only_in_per_job_variables_share_a_zygote(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest names the running test in the environment (PYTEST_CURRENT_TEST): in the zygote's key it warmed a
    zygote for every test. The job still gets its own value; any other variable is another setting."""
    problem = _problem(tmp_path, "env", top="import os\nprint('NAMED', os.environ.get('PYTEST_CURRENT_TEST'))")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "the first test")
    first = _probe(problem, tmp_path / "w1")
    warm = _cpu_zygote()
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "the second test")
    second = _probe(problem, tmp_path / "w2")
    assert first.forked and second.forked and _cpu_zygote() is warm
    assert "NAMED the first test" in first.stdout_tail and "NAMED the second test" in second.stdout_tail
    env = scrubbed_environment(job_environment("cpu"))
    assert zygote.zygote_key(env) != zygote.zygote_key({**env, "KERNELWRIGHT_SOME_SETTING": "1"})


def test_a_killed_zygote_is_replaced_and_the_next_job_still_forks(tmp_path: Path, fresh_zygotes: None) -> None:
    problem = _problem(tmp_path, "plain")
    assert _probe(problem, tmp_path / "w1").forked
    warm = _cpu_zygote()
    os.killpg(warm.proc.pid, signal.SIGKILL)
    warm.proc.wait(timeout=30)
    run = _probe(problem, tmp_path / "w2")
    assert run.finished and run.forked and run.report(ProbeResult).ok, run.stderr_tail
    assert _cpu_zygote() is not warm


@pytest.mark.slow
def test_a_zygote_that_dies_while_its_job_runs_ends_the_job_not_the_parent(tmp_path: Path, fresh_zygotes: None) -> None:
    problem = _problem(tmp_path, "slow", top="import time\ntime.sleep(60)")
    assert _probe(_problem(tmp_path, "plain"), tmp_path / "w0").forked  # the zygote is warm
    warm = _cpu_zygote()
    threading.Timer(3.0, lambda: os.killpg(warm.proc.pid, signal.SIGKILL)).start()
    started = time.monotonic()
    run = _probe(problem, tmp_path / "w1", timeout_s=120)
    assert time.monotonic() - started < 50, "the job outlived its zygote"
    assert not run.finished and not run.timed_out


@pytest.mark.slow
def test_a_zygote_that_cannot_start_leaves_each_job_to_a_fresh_interpreter(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          fresh_zygotes: None) -> None:
    monkeypatch.setattr(zygote.Zygote, "COMMAND", (sys.executable, "-c", "import sys; sys.exit(3)"))
    problem = _problem(tmp_path, "plain")
    for i in range(2):  # the first finds it dead at start, the second knows it without trying again
        run = _probe(problem, tmp_path / f"w{i}")
        assert run.finished and not run.forked and run.report(ProbeResult).ok, run.stderr_tail
    with pytest.raises(zygote.ZygoteUnavailable):
        _cpu_zygote()


@pytest.mark.slow
def test_without_the_zygote_setting_every_job_is_a_fresh_interpreter(tmp_path: Path) -> None:
    with config.scope(job_zygote=False):
        run = _probe(_problem(tmp_path, "plain"), tmp_path / "w")
    assert run.finished and not run.forked


@pytest.mark.slow
def test_a_gpu_zygote_serves_before_inductor_and_imports_it_while_idle(fresh_zygotes) -> None:
    """What only the compile baselines need (Inductor, some 4 s) is imported after the zygote says it serves, so the
    first job asked for (a verify's reference) does not wait for it (run 66: 10 s of imports before the first fork)."""
    env = scrubbed_environment(job_environment("cuda"))
    assert env.get("TRITON_INTERPRET", "0") in ("", "0") and env.get("CUDA_VISIBLE_DEVICES") != ""
    warm = zygote.zygote_for(env)
    assert warm.wait_ready(), warm.error
    deadline = time.monotonic() + 120
    while "torch._inductor.compile_fx" not in warm.warmed and time.monotonic() < deadline:
        time.sleep(0.1)
    assert warm.warmed["torch._inductor.compile_fx"] > warm.ready_s
