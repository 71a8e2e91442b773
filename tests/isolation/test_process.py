"""The child-process layer: environment scrubbing, leftover processes, protocol robustness."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwright.isolation.process import _read_channel, run_child, scrubbed_environment


def test_credentials_are_removed_and_the_rest_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "MY_PASSWORD", "SOME_SECRET"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("KERNELWRIGHT_TRIALS", "6")
    env = scrubbed_environment({"TRITON_INTERPRET": "1"})
    assert not {"OPENAI_API_KEY", "DEEPSEEK_API_KEY", "HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                "MY_PASSWORD", "SOME_SECRET"} & set(env)
    assert env["PATH"] == os.environ["PATH"] and env["KERNELWRIGHT_TRIALS"] == "6"
    assert env["TRITON_INTERPRET"] == "1"
    assert str(Path(__file__).resolve().parents[2] / "src") in env["PYTHONPATH"].split(os.pathsep)


def test_processes_left_behind_are_reported_and_killed(tmp_path: Path) -> None:
    marker, go = tmp_path / "still-running", tmp_path / "go"
    sleeper = tmp_path / "sleeper.py"
    # Alive until the test says go (or a minute passes), then it leaves a mark: killed with its job, it leaves none.
    sleeper.write_text(f"import pathlib, time\ngo = pathlib.Path({str(go)!r})\n"
                       "for _ in range(1200):\n    if go.exists():\n        break\n    time.sleep(0.05)\n"
                       f"pathlib.Path({str(marker)!r}).write_text('alive')\n")
    problem = tmp_path / "lingering_problem.py"
    problem.write_text(
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, {str(sleeper)!r}])\n"
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
        "def get_inputs():\n    return [torch.randn(4)]\n"
    )
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir()
    private.mkdir()
    spec = {"problem": str(problem), "device": "cpu", "init_seed": 1, "trials": [], "shared_dir": str(shared),
            "private_dir": str(private), "count_work": False, "aliasing": False}
    run = run_child("reference", spec, workdir=tmp_path / "work", timeout_s=120,
                    env_extra={"CUDA_VISIBLE_DEVICES": ""})
    assert run.finished and run.leftover_processes
    import time

    go.write_text("")
    time.sleep(1.0)  # twenty times the sleeper's poll
    assert not marker.exists()  # the whole process group was killed


def test_malformed_messages_are_protocol_errors_not_crashes() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b'{"event": "trial", "index": 0}\nnot json\n[1, 2]\n' + b"[" * 20_000 + b"\n"
             + b'{"event": "done"}\n{"trunc')
    os.close(write_fd)
    messages: list[dict] = []
    errors: list[str] = []
    arrivals: list[float] = []
    _read_channel(read_fd, messages, errors, arrivals)
    assert [m["event"] for m in messages] == ["trial", "done"] and len(arrivals) == 1
    assert len(errors) == 4 and sum("unparseable" in e for e in errors) == 2 and any("truncated" in e for e in errors)


def test_one_policy_for_every_job_by_device(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kernelwright.isolation.process import job_environment, memory_limit

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    cpu, gpu = job_environment("cpu"), job_environment("cuda")
    assert cpu["TRITON_INTERPRET"] == "1" and cpu["CUDA_VISIBLE_DEVICES"] == ""
    assert "TRITON_INTERPRET" not in gpu and "CUDA_VISIBLE_DEVICES" not in gpu
    assert cpu["TRITON_CACHE_DIR"] == gpu["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    monkeypatch.setenv("KERNELWRIGHT_CHILD_MEMORY_GB", "2")
    assert memory_limit("cpu") == 2 << 30
    assert memory_limit("cuda") == 0 and memory_limit(None) == 0  # an address-space limit would break CUDA
    monkeypatch.setenv("KERNELWRIGHT_CHILD_MEMORY_GB", "-1")
    assert memory_limit("cpu") == 0


@pytest.mark.slow
def test_a_cpu_job_gets_the_memory_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A job on the CPU that allocates past the limit dies with an out-of-memory error, not the machine."""
    monkeypatch.setenv("KERNELWRIGHT_CHILD_MEMORY_GB", "1")
    problem = tmp_path / "hungry_problem.py"
    problem.write_text(
        "import torch, torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x\n"
        "def get_inputs():\n"
        "    return [torch.empty(1 << 30, dtype=torch.float32)]\n"  # 4 GiB
        "def get_init_inputs():\n"
        "    return []\n")
    from kernelwright.verify.probe import probe_problem

    result = probe_problem(problem, device="cpu", timeout_s=120)
    assert not result.ok and "memory" in result.message.lower(), result.message


def test_a_childs_lock_wait_is_read_defensively() -> None:
    from kernelwright.isolation.process import ChildRun

    def run(*messages: dict, wall_s: float = 10.0) -> ChildRun:
        return ChildRun(job="candidate", returncode=0, timed_out=False, wall_s=wall_s, messages=messages,
                        stderr_tail="", stdout_tail="")

    assert run().lock_wait_s == 0.0
    assert run({"event": "lock_wait", "seconds": 2.5}, {"event": "lock_wait", "seconds": 1.0}).lock_wait_s == 3.5
    # whatever runs in the child can write the channel: nonsense is ignored, and no job waited longer than it ran
    assert run({"event": "lock_wait", "seconds": "lots"}, {"event": "lock_wait", "seconds": float("nan")},
               {"event": "lock_wait", "seconds": -5}).lock_wait_s == 0.0
    assert run({"event": "lock_wait", "seconds": 1e9}, wall_s=4.0).lock_wait_s == 4.0


# -- prestarted children ------------------------------------------------------------------------------------------
def _probe_problem(tmp_path: Path, body: str = "return x * 2") -> Path:
    problem = tmp_path / "probe_me.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n"
                       f"    def forward(self, x):\n        {body}\n"
                       "def get_inputs():\n    return [torch.randn(4)]\n"
                       "def get_init_inputs():\n    return []\n")
    return problem


def _probe_spec(problem: Path) -> dict:
    return {"problem": str(problem), "device": "cpu", "max_elements": 1 << 18}


@pytest.mark.slow
def test_a_prestarted_child_takes_the_job_and_serves_only_one(tmp_path: Path) -> None:
    from kernelwright.isolation import process
    from kernelwright.jobs import ProbeResult

    work = tmp_path / "work"
    process.warm_zygote("cpu", wait=True)  # a prestart starts at once only from a zygote that serves
    assert process.prestart_child("probe", workdir=work, device="cpu")
    assert not process.prestart_child("probe", workdir=work, device="cpu")  # one waits already
    waiting = next(p for k, p in process._PRESTARTED.items() if k[1] == str(work.resolve()))
    run = run_child("probe", _probe_spec(_probe_problem(tmp_path)), workdir=work, timeout_s=120, device="cpu")
    assert run.finished and run.report(ProbeResult) is not None, run.stderr_tail
    assert waiting.proc.returncode is not None  # the job ran in the prestarted process, which has ended
    assert not [k for k in process._PRESTARTED if k[1] == str(work.resolve())]
    # the next job of the same kind gets a fresh process, as without a prestart
    again = run_child("probe", _probe_spec(_probe_problem(tmp_path)), workdir=work, timeout_s=120, device="cpu")
    assert again.finished and again.report(ProbeResult) is not None


@pytest.mark.slow
def test_a_prestarted_child_that_died_costs_nothing_and_discard_ends_the_rest(tmp_path: Path) -> None:
    import signal

    from kernelwright.isolation import process
    from kernelwright.jobs import ProbeResult

    work = tmp_path / "work"
    process.warm_zygote("cpu", wait=True)  # a prestart starts at once only from a zygote that serves
    assert process.prestart_child("probe", workdir=work, device="cpu")
    waiting = next(p for k, p in process._PRESTARTED.items() if k[1] == str(work.resolve()))
    os.killpg(waiting.proc.pid, signal.SIGKILL)
    waiting.proc.wait(timeout=30)
    run = run_child("probe", _probe_spec(_probe_problem(tmp_path)), workdir=work, timeout_s=120, device="cpu")
    assert run.finished and run.report(ProbeResult) is not None, run.stderr_tail
    # another environment is another key: a prestart never serves a job it was not started for
    process.warm_zygote("cpu", {"KW_TEST_MARK": "1"}, wait=True)  # another environment: a zygote of its own
    assert process.prestart_child("probe", workdir=work, device="cpu", env_extra={"KW_TEST_MARK": "1"})
    other = next(p for k, p in process._PRESTARTED.items() if k[1] == str(work.resolve()))
    plain = run_child("probe", _probe_spec(_probe_problem(tmp_path)), workdir=work, timeout_s=120, device="cpu")
    assert plain.finished and other.proc.poll() is None
    assert process.discard_prestarted(work) == 1
    assert other.proc.poll() is not None


@pytest.mark.slow
def test_a_crash_in_a_prestarted_childs_job_is_that_jobs_verdict(tmp_path: Path) -> None:
    from kernelwright.isolation import process

    work = tmp_path / "work"
    process.warm_zygote("cpu", wait=True)  # a prestart starts at once only from a zygote that serves
    assert process.prestart_child("probe", workdir=work, device="cpu")
    problem = _probe_problem(tmp_path, body="import os; os._exit(3)")
    run = run_child("probe", _probe_spec(problem), workdir=work, timeout_s=120, device="cpu")
    assert not run.finished and run.returncode == 3, (run.returncode, run.stderr_tail)
    assert "before finishing" in run.describe_exit()
    ok = run_child("probe", _probe_spec(_probe_problem(tmp_path)), workdir=work, timeout_s=120, device="cpu")
    assert ok.finished  # the next job has a process of its own


def test_a_job_ends_when_its_orchestrator_is_killed(tmp_path):
    """A bench worker killed by the OOM killer runs no clean-up: its children (own sessions) must not live on,
    filling /dev/shm or holding the GPU lock. A job that waits on nothing its parent holds (a long reference, a
    hanging candidate) ends too, with what it started."""
    import os
    import signal
    import subprocess
    import sys
    import time

    job = ("import subprocess, sys, time\n"
           "from kernelwright.isolation.child import _end_with_parent\n"
           "_end_with_parent(0.1)\n"
           "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
           "print(grandchild.pid, flush=True)\n"
           "time.sleep(60)\n")
    orchestrator = ("import subprocess, sys, time\n"
                    f"job = subprocess.Popen([sys.executable, '-c', {job!r}], start_new_session=True)\n"
                    "print(job.pid, flush=True)\n"
                    "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", orchestrator], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(3)  # the job has imported kernelwright and started its own child
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()

    def gone(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().split(")")[-1].split()[0] == "Z"  # a zombie until init reaps it
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not gone(child):
        time.sleep(0.2)
    if not gone(child):
        os.killpg(child, signal.SIGKILL)
        raise AssertionError("the job outlived its orchestrator")
