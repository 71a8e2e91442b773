"""``kernelwright bench --executor ray`` on a one-machine Ray cluster of logical GPUs (CI has no GPU): problems as
Ray tasks, each placed on a GPU by Ray's scheduler with that GPU's own lock; a worker that dies costs its own row;
the rows are the local executor's rows."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from kernelwright.bench import executor, runner  # noqa: E402
from kernelwright.cli import main  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
SOFTMAX = HERE / "verify" / "problems" / "softmax.py"
CANDIDATES = HERE / "verify" / "candidates"

KILLS_ITS_RAY_WORKER = '''import os, signal, sys
if sys.argv and sys.argv[0].endswith("default_worker.py"):  # a Ray worker imports it: die as an OOM kill does
    os.kill(os.getpid(), signal.SIGKILL)
'''

@pytest.fixture(scope="module")
def cluster():
    """Two CPUs and two logical GPUs (Ray sets each task's CUDA_VISIBLE_DEVICES as it would for real ones)."""
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the probe below, in the workers
    yield ray
    ray.shutdown()


def probe(task: runner.Task) -> tuple[dict, dict]:
    """A stand-in for the bench's run_task that says where it ran."""
    from kernelwright.hardware import gpu_lock

    if task.problem.name == "dies":
        os.kill(os.getpid(), 9)
    started = time.time()
    time.sleep(1.0)
    return {"name": task.problem.name, "status": "passed", "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "lock": os.environ.get(gpu_lock.ENV), "span": (started, time.time()), "pid": os.getpid()}, {}


@pytest.mark.slow
def test_ray_executor(cluster, tmp_path: Path) -> None:
    """One test, one cluster: xdist would otherwise start a cluster in each of its workers."""
    _places_each_problem_on_a_gpu_with_that_gpus_lock(tmp_path / "placement")
    _bench_costs_a_dead_worker_its_row_only(tmp_path / "bench")


def _places_each_problem_on_a_gpu_with_that_gpus_lock(tmp_path: Path) -> None:
    tmp_path.mkdir()
    settings = runner.BenchSettings(out_dir=tmp_path, device="cuda", jobs=2, executor="ray", solutions=True)
    tasks = [runner.Task(problem=runner.BenchProblem(name=n, path=tmp_path / f"{n}.py"), settings=settings)
             for n in ("a", "b", "dies", "c", "d")]
    finished: dict[str, dict] = {}
    executor.run_ray(tasks, settings, executor.Side(
        run_task=probe, clamp=lambda t: t, finish=lambda t, row, _: finished.__setitem__(t.problem.name, row),
        progress=runner.BenchProgress(total=len(tasks), stream=io.StringIO())))
    assert finished["dies"]["status"] == "crashed" and "WorkerCrashedError" in finished["dies"]["message"]
    ran = [finished[n] for n in "abcd"]
    assert all(r["status"] == "passed" and r["gpu"] == r["cvd"] for r in ran)  # Ray's GPU, the row's GPU
    assert {r["gpu"] for r in ran} == {"0", "1"}  # both GPUs used: one whole GPU a job at --jobs 2 on 2
    for r in ran:  # each GPU's own lock, shared by every task of this bench placed on it
        assert r["lock"].endswith(f"gpu{r['gpu']}.lock")
    assert len({r["lock"] for r in ran}) == 2
    # A whole GPU each: two problems never ran at once on one GPU.
    for x in ran:
        for y in ran:
            if x is not y and x["gpu"] == y["gpu"]:
                assert x["span"][1] <= y["span"][0] or y["span"][1] <= x["span"][0]


def test_ray_shares_a_gpu_when_jobs_outnumber_gpus() -> None:
    gpu = runner.BenchSettings(out_dir=Path("."), device="cuda")
    assert executor.ray_options(gpu, gpus=2, jobs=2)["num_gpus"] == 1
    assert executor.ray_options(gpu, gpus=2, jobs=4)["num_gpus"] == 0.5
    assert executor.ray_options(gpu, gpus=2, jobs=3)["num_gpus"] == pytest.approx(0.6667)
    cpu = runner.BenchSettings(out_dir=Path("."), device="cpu")
    assert "num_gpus" not in executor.ray_options(cpu, gpus=2, jobs=2)
    assert executor.ray_options(cpu, gpus=0, jobs=2)["max_retries"] == 0  # a dead worker is a row, not a rerun


def _bench_costs_a_dead_worker_its_row_only(tmp_path: Path) -> None:
    tmp_path.mkdir()
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir(), solutions.mkdir()
    shutil.copy(SOFTMAX, problems / "1_softmax.py")
    (problems / "2_killer.py").write_text(KILLS_ITS_RAY_WORKER + SOFTMAX.read_text())
    shutil.copy(CANDIDATES / "softmax_ok.py", solutions / "1_softmax.py")
    shutil.copy(CANDIDATES / "softmax_ok.py", solutions / "2_killer.py")
    out = tmp_path / "bench"
    assert main(["bench", str(problems), "--solutions", str(solutions), "--out", str(out), "--db",
                 str(tmp_path / "runs.sqlite"), "--device", "cpu", "--executor", "ray", "--jobs", "2"]) == 0
    by_name = {r["name"]: r for r in json.loads((out / "results.json").read_text())["problems"]}
    assert by_name["2_killer"]["status"] == "crashed" and "died" in by_name["2_killer"]["message"]
    # The row the local executor gives the same files (tests/bench/test_bench_cpu.py): a verdict, not a place.
    assert by_name["1_softmax"]["status"] == "passed" and "gpu" not in by_name["1_softmax"]
    assert ray.is_initialized()  # a cluster the caller connected stays connected


def test_ray_flags_that_cannot_work_say_so(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text(SOFTMAX.read_text())
    assert main(["bench", str(tmp_path / "p.py"), "--ray-address", "auto", "--device", "cpu",
                 "--out", str(tmp_path / "o")]) == 2
