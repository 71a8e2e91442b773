"""``kernelwright bench`` end to end on the CPU: outside solutions scored with the verifier (an honest one, a wrong
one, an exploit), a problem that is itself broken, the resume, and bad invocations — each a row or one line."""

from __future__ import annotations

import io
import json
import shutil
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.verify.inputs import PROBLEM_MODULE

HERE = Path(__file__).resolve().parents[1]
SOFTMAX = HERE / "verify" / "problems" / "softmax.py"
VECTOR_ADD = HERE / "verify" / "problems" / "vector_add.py"
CANDIDATES = HERE / "verify" / "candidates"

LIBRARY_IN_DISGUISE = '''"""Claims a kernel; returns PyTorch's answer."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
'''

BROKEN = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        raise RuntimeError("this problem's forward is broken")


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def suite(tmp_path: Path) -> tuple[Path, Path]:
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir()
    solutions.mkdir()
    shutil.copy(SOFTMAX, problems / "1_softmax.py")
    shutil.copy(SOFTMAX, problems / "2_softmax_again.py")
    shutil.copy(VECTOR_ADD, problems / "3_vector_add.py")
    (problems / "4_broken.py").write_text(BROKEN)
    shutil.copy(SOFTMAX, problems / "5_unanswered.py")
    shutil.copy(CANDIDATES / "softmax_ok.py", solutions / "1_softmax.py")
    shutil.copy(CANDIDATES / "softmax_wrong.py", solutions / "2_softmax_again.py")
    (solutions / "3_vector_add.py").write_text(LIBRARY_IN_DISGUISE)
    shutil.copy(CANDIDATES / "softmax_ok.py", solutions / "4_broken.py")
    return problems, solutions


@pytest.mark.slow
def test_outside_solutions_are_scored_and_a_rerun_resumes(suite: tuple[Path, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    problems, solutions = suite
    out, db = tmp_path / "bench", tmp_path / "runs.sqlite"
    # Two at a time: the worker-process path (on a GPU the jobs would share it through the GPU lock).
    args = ["bench", str(problems), "--solutions", str(solutions), "--out", str(out), "--db", str(db),
            "--device", "cpu", "--jobs", "2"]
    assert main(args) == 0
    doc = json.loads((out / "results.json").read_text())
    by_name = {r["name"]: r for r in doc["problems"]}
    assert by_name["1_softmax"]["status"] == "passed"
    assert by_name["2_softmax_again"]["status"] == "incorrect"
    exploit = by_name["3_vector_add"]
    assert exploit["status"] == "rejected" and exploit["exploit"] and "no-own-kernel" in exploit["findings"]
    assert by_name["4_broken"]["status"] == "input-error" and "fix the problem file" in by_name["4_broken"]["message"]
    assert by_name["5_unanswered"]["status"] == "no-solution"
    assert doc["summary"]["fast_0"] == 0.2 and doc["summary"]["exploits"] == [["3_vector_add", "no-own-kernel"]]
    assert not doc["timed"] and "Nothing was timed" in doc["note"]
    assert (out / "report.md").is_file() and (out / "1_softmax" / "verdict.json").is_file()
    capsys.readouterr()

    # The same bench again with --resume: every finished row comes from the run database, nothing is verified.
    assert main([*args, "--resume"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["resumed_rows"] == 5  # a solution added later changes the key: that row is redone then
    assert [r["status"] for r in again["problems"]] == [r["status"] for r in doc["problems"]]
    assert again["elapsed_s"] < 10


@pytest.mark.parametrize("make, args, message", [
    (lambda t: (t / "empty").mkdir(), ["{t}/empty"], "holds no problem files"),
    (lambda t: None, ["{t}/nothing-here"], "does not exist"),
    (lambda t: (t / "s").mkdir(), ["{softmax}", "--solutions", "{t}/s"], "no file in .* matches a problem"),
    (lambda t: (t / "out").write_text("x"), ["{softmax}", "--out", "{t}/out"], "is a file"),
])
def test_bad_invocations_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], make, args,
                                              message) -> None:
    import re

    make(tmp_path)
    argv = ["bench", *(a.format(t=tmp_path, softmax=SOFTMAX) for a in args), "--device", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err


@pytest.mark.parametrize("flag", [["--budget", "5"], ["--budget-per-problem", "0s"], ["--jobs", "0"],
                                  ["--baselines", "fast"]])
def test_bad_flags_are_refused(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", str(SOFTMAX), *flag])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_templates_bench_stops_starting_problems_when_the_total_budget_is_spent(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    # The reference's job imports the problem under its own module name: there the import outlasts the budget,
    # whatever the machine's speed (a whole CPU verify of vector_add now fits in 2 s).
    slow_reference = (f'import time\nif __name__ == "{PROBLEM_MODULE}":\n    time.sleep(30)\n'
                      + VECTOR_ADD.read_text())
    (problems / "1_vector_add.py").write_text(slow_reference)
    shutil.copy(SOFTMAX, problems / "2_softmax.py")
    out = tmp_path / "bench"
    started = time.monotonic()
    assert main(["bench", str(problems), "--out", str(out), "--db", str(tmp_path / "runs.sqlite"),
                 "--device", "cpu", "--budget", "2s"]) == 0
    doc = json.loads((out / "results.json").read_text())
    first, second = doc["problems"]
    # The first problem started inside the budget, and its verify was cut at the budget's end: a timeout that says
    # so, not a verify that runs on. The second never started.
    assert first["status"] == "timeout" and "budget" in first["message"] and first["families"] == ["pointwise"]
    assert second["status"] == "not-run" and "--resume" in second["message"]
    assert time.monotonic() - started < 60


KILLS_ITS_WORKER = '''import multiprocessing, os, signal
if multiprocessing.current_process().name != "MainProcess":  # a bench worker imports it: die as an OOM kill does
    os.kill(os.getpid(), signal.SIGKILL)
'''


@pytest.mark.slow
def test_a_worker_killed_mid_bench_costs_its_own_row_only(tmp_path: Path) -> None:
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir(), solutions.mkdir()
    shutil.copy(SOFTMAX, problems / "1_softmax.py")
    (problems / "2_killer.py").write_text(KILLS_ITS_WORKER + SOFTMAX.read_text())
    shutil.copy(SOFTMAX, problems / "3_softmax_after.py")
    for name in ("1_softmax", "2_killer", "3_softmax_after"):
        shutil.copy(CANDIDATES / "softmax_ok.py", solutions / f"{name}.py")
    out = tmp_path / "bench"
    assert main(["bench", str(problems), "--solutions", str(solutions), "--out", str(out), "--db",
                 str(tmp_path / "runs.sqlite"), "--device", "cpu", "--jobs", "2"]) == 0
    by_name = {r["name"]: r for r in json.loads((out / "results.json").read_text())["problems"]}
    killed = by_name["2_killer"]
    assert killed["status"] == "crashed" and "SIGKILL" in killed["message"] and "--jobs" in killed["message"]
    # The one beside it (its worker ended with the broken pool) ran again; the one after ran in the new pool.
    assert by_name["1_softmax"]["status"] == "passed" and by_name["3_softmax_after"]["status"] == "passed"


class _ScriptedPool:
    """A ProcessPoolExecutor whose first pool breaks the way CI's did: the first problem's row comes back, the
    second problem's worker dies, and the pool is found broken at the *next submit* (before any future says so)."""

    pools: list[_ScriptedPool] = []

    def __init__(self, *args: object, initargs: tuple = (), **kwargs: object) -> None:
        import types

        self.first = not _ScriptedPool.pools
        self.initargs = initargs
        self.submitted: list[int] = []
        self.killed_future: Future | None = None
        self._processes = {4242: types.SimpleNamespace(exitcode=-9, join=lambda timeout=None: None)}
        _ScriptedPool.pools.append(self)

    def submit(self, fn: object, run_task: object, task: object, record_dir: str, token: int) -> Future:
        from concurrent.futures.process import BrokenProcessPool

        future: Future = Future()
        if self.first and len(self.submitted) == 2:
            assert self.killed_future is not None
            self.killed_future.set_exception(BrokenProcessPool("a child process terminated abruptly"))
            raise BrokenProcessPool("A child process terminated abruptly, the process pool is not usable anymore")
        self.submitted.append(token)
        if self.first and token == 1:  # its worker records itself, then dies
            (Path(record_dir) / "4242").write_text(str(token))
            self.killed_future = future
        else:
            future.set_result(({"name": task.problem.name, "status": "passed"}, {}, {}))  # type: ignore[attr-defined]
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def _side(finished: dict[str, dict]) -> object:
    from kernelwright.bench import executor, runner

    return executor.Side(run_task=runner.run_task, clamp=lambda task: task,
                         finish=lambda task, row, baselines: finished.__setitem__(task.problem.name, row),
                         progress=runner.BenchProgress(total=3, stream=io.StringIO()))


def _tasks(tmp_path: Path, settings: object, names: tuple[str, ...]) -> list:
    from kernelwright.bench import runner

    return [runner.Task(problem=runner.BenchProblem(name=n, path=tmp_path / f"{n}.py"), settings=settings)
            for n in names]


def test_a_pool_found_broken_at_submit_still_names_its_casualty(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.bench import executor, runner

    _ScriptedPool.pools = []
    monkeypatch.setattr(executor, "ProcessPoolExecutor", _ScriptedPool)
    settings = runner.BenchSettings(out_dir=tmp_path, device="cpu", jobs=2, solutions=True)
    finished: dict[str, dict] = {}
    executor.run_local(_tasks(tmp_path, settings, ("1_quick", "2_killed", "3_after")), settings, _side(finished))
    assert finished["1_quick"]["status"] == "passed" and finished["3_after"]["status"] == "passed"
    assert finished["2_killed"]["status"] == "crashed" and "SIGKILL" in finished["2_killed"]["message"]
    assert _ScriptedPool.pools[1].submitted == [2]  # the one not yet started ran in the fresh pool, once


def test_a_bench_cut_by_ctrl_c_keeps_the_lock_holds_of_its_finished_problems(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Run 58 (H200, 2026-12-04) was cut by gpu_bench.sh's limit and its results.json had no gpu_lock_holds at all:
    the summary was only returned by an executor that ended normally. Each task's holds are kept as it finishes."""
    from kernelwright.bench import executor, runner

    class Pool(_ScriptedPool):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.first = False

        def submit(self, fn: object, run_task: object, task: object, record_dir: str, token: int) -> Future:
            future: Future = Future()
            held = {"candidate exclusive": {"holds": 1 + token, "total_s": 2.0, "max_s": 2.0}}
            future.set_result(({"name": task.problem.name, "status": "passed"}, {}, held))  # type: ignore[attr-defined]
            return future

    _ScriptedPool.pools = []
    monkeypatch.setattr(executor, "ProcessPoolExecutor", Pool)
    settings = runner.BenchSettings(out_dir=tmp_path, device="cpu", jobs=2, solutions=True)
    finished: dict[str, dict] = {}
    side = _side(finished)

    def finish(task: object, row: dict, baselines: dict) -> None:
        finished[row["name"]] = row
        if len(finished) == 1:
            raise KeyboardInterrupt  # Ctrl-C (or the call's limit) lands while the parent files the first row

    side.finish = finish  # type: ignore[attr-defined]
    with pytest.raises(KeyboardInterrupt):
        executor.run_local(_tasks(tmp_path, settings, ("a", "b", "c")), settings, side)
    assert len(side.holds) == len(finished) >= 1  # type: ignore[attr-defined]
    from kernelwright.hardware import gpu_lock

    merged = gpu_lock.merge_summaries(*side.holds)  # type: ignore[attr-defined]
    assert merged["candidate exclusive"]["total_s"] == 2.0 * len(finished)


def test_a_multi_gpu_bench_gives_each_gpu_its_workers_and_lock(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """--jobs 3 over GPUs 0 and 2: two lanes (two workers on GPU 0, one on GPU 2), each pool's workers told their
    GPU and their own lock before they start; the problems are dealt to the least busy lane; rows say their GPU."""
    from kernelwright.bench import executor, runner

    class Pool(_ScriptedPool):
        def __init__(self, *args: object, max_workers: int = 0, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.first, self.max_workers = False, max_workers

    _ScriptedPool.pools = []
    monkeypatch.setattr(executor, "ProcessPoolExecutor", Pool)
    settings = runner.BenchSettings(out_dir=tmp_path, device="cuda", jobs=3, gpus=("0", "2"), solutions=True)
    finished: dict[str, dict] = {}
    executor.run_local(_tasks(tmp_path, settings, ("a", "b", "c", "d")), settings, _side(finished))
    lanes = {p.initargs[1]: p for p in _ScriptedPool.pools}
    assert set(lanes) == {"0", "2"} and lanes["0"].max_workers == 2 and lanes["2"].max_workers == 1
    assert all(p.initargs[0] == 3 for p in lanes.values())  # the machine's share is split between all jobs
    assert lanes["0"].initargs[2] != lanes["2"].initargs[2]  # a lock each: GPU 0's measurements never wait on 2's
    assert lanes["0"].initargs[2].endswith("gpu0.lock") and lanes["2"].initargs[2].endswith("gpu2.lock")
    assert lanes["0"].submitted[:1] == [0] and lanes["2"].submitted[:1] == [1]  # dealt out, not stacked on one
    assert {finished[n]["gpu"] for n in "abcd"} == {"0", "2"}
    assert sorted(lanes["0"].submitted + lanes["2"].submitted) == [0, 1, 2, 3]


def test_one_chosen_gpu_is_the_one_the_workers_see(tmp_path: Path) -> None:
    """--gpus 1 on a machine of several: one lane, its workers told CUDA_VISIBLE_DEVICES=1 (not left on GPU 0)."""
    from kernelwright.bench import executor, runner

    one = executor.lanes(runner.BenchSettings(out_dir=tmp_path, device="cuda", jobs=2, gpus=("1",)), str(tmp_path))
    assert [(lane.gpu, lane.capacity) for lane in one] == [("1", 2)] and one[0].lock.endswith("gpu1.lock")
    found = executor.lanes(runner.BenchSettings(out_dir=tmp_path, device="cuda", jobs=2), str(tmp_path))
    assert [(lane.gpu, lane.capacity) for lane in found] == [(None, 2)]  # none named: as the bench found it
    cpu = executor.lanes(runner.BenchSettings(out_dir=tmp_path, device="cpu", jobs=3, gpus=("0", "1")), str(tmp_path))
    assert [(lane.gpu, lane.lock) for lane in cpu] == [(None, None)]


def test_gpus_flag_names_visible_gpus_only() -> None:
    from kernelwright.bench.executor import parse_gpus
    from kernelwright.errors import InputError

    assert parse_gpus("all", ("0", "1")) == ("0", "1")
    assert parse_gpus("1, 0,1", ("0", "1")) == ("1", "0")
    with pytest.raises(InputError, match=r"GPU 3 is not visible.*visible: 0, 1"):
        parse_gpus("0,3", ("0", "1"))
    with pytest.raises(InputError, match="nothing"):
        parse_gpus(",", ("0",))
