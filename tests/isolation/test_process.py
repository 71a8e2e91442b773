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
    marker = tmp_path / "still-running"
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(f"import pathlib, time\ntime.sleep(3)\npathlib.Path({str(marker)!r}).write_text('alive')\n")
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

    time.sleep(4)
    assert not marker.exists()  # the whole process group was killed


def test_malformed_messages_are_protocol_errors_not_crashes() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b'{"event": "trial", "index": 0}\nnot json\n[1, 2]\n' + b"[" * 20_000 + b"\n"
             + b'{"event": "done"}\n{"trunc')
    os.close(write_fd)
    messages: list[dict] = []
    errors: list[str] = []
    _read_channel(read_fd, messages, errors)
    assert [m["event"] for m in messages] == ["trial", "done"]
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
