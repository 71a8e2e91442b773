"""The GPU lock between jobs that share one device (hardware/gpu_lock.py): sharers overlap, a measurement overlaps
nothing, and a waiting measurement is not starved by sharers that keep coming."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

from kernelwright.hardware import gpu_lock


def _worker(path: str, mode: str, hold_s: float, log: str, start_delay: float) -> None:
    import os

    os.environ[gpu_lock.ENV] = path
    time.sleep(start_delay)
    if mode == "shared":
        gpu_lock.hold_shared()
        began = time.monotonic()
        time.sleep(hold_s)
        gpu_lock.release()
    else:
        gpu_lock.hold_shared()  # as a child job does: shared first, then upgraded for the measurement
        with gpu_lock.exclusive():
            began = time.monotonic()
            time.sleep(hold_s)
        gpu_lock.release()
    with open(log, "a") as fh:
        fh.write(f"{mode} {began:.3f} {time.monotonic():.3f}\n")


def _run(tmp_path: Path, jobs: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    log = tmp_path / "log"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "gpu.lock"), mode, hold, str(log), delay))
             for mode, hold, delay in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(m, float(a), float(b)) for m, a, b in rows]


def _overlap(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] - 0.01 and b[1] < a[2] - 0.01


def test_sharers_overlap_and_a_measurement_overlaps_nothing(tmp_path: Path) -> None:
    rows = _run(tmp_path, [("shared", 0.8, 0.0), ("shared", 0.8, 0.0), ("exclusive", 0.3, 0.2),
                           ("shared", 0.3, 0.4)])
    shared = [r for r in rows if r[0] == "shared"]
    exclusive = [r for r in rows if r[0] == "exclusive"]
    assert _overlap(shared[0], shared[1]) or _overlap(shared[0], shared[2]) or _overlap(shared[1], shared[2])
    for s in shared:
        assert not _overlap(s, exclusive[0]), rows
    # The sharer that arrived while the measurement waited went after it (writer preference).
    late = max(shared, key=lambda r: r[1])
    assert late[1] >= exclusive[0][2] - 0.01, rows


def test_off_without_the_variable(monkeypatch) -> None:
    monkeypatch.delenv(gpu_lock.ENV, raising=False)
    assert not gpu_lock.enabled()
    gpu_lock.hold_shared()
    with gpu_lock.exclusive(), gpu_lock.idle():
        pass
    gpu_lock.release()
    assert gpu_lock.waited_s() == 0.0


def test_a_measurement_holds_the_lock_alone_and_gives_it_back(tmp_path: Path, monkeypatch) -> None:
    """verify.timing.measure runs under the exclusive lock and returns to the job's shared hold afterwards."""
    from kernelwright.verify.child import timing

    monkeypatch.setenv(gpu_lock.ENV, str(tmp_path / "gpu.lock"))
    gpu_lock.hold_shared()
    seen = []

    @timing._alone_on_device
    def fake_measure() -> str:
        seen.append(gpu_lock._get().mode)
        return "measured"

    assert fake_measure() == "measured"
    assert seen == [gpu_lock._EXCLUSIVE] and gpu_lock._get().mode == gpu_lock._SHARED
    assert timing.measure.__wrapped__.__name__ == "measure"  # the real measure is wrapped the same way
    gpu_lock.release()



def _modes_inside_inductor_benchmarks(tmp_path: Path, monkeypatch, *, harness_hook: bool) -> list[int]:
    """The lock's mode inside one of Inductor's GPU benchmarks and after it, through torch's harness hook or, on a
    torch older than that hook, through the benchmarker classes' own methods."""
    from torch._inductor.runtime import benchmarking

    monkeypatch.setenv(gpu_lock.ENV, str(tmp_path / "gpu.lock"))
    monkeypatch.setattr(gpu_lock, "_inductor_hooked", False)
    for cls in (c for c in vars(benchmarking).values() if isinstance(c, type)):
        for name in [n for n in vars(cls) if n.startswith("benchmark_gpu")]:
            monkeypatch.setattr(cls, name, vars(cls)[name])  # whatever the hook wraps is put back afterwards
    seen: list[int] = []

    def fake_benchmark_gpu(self, fn, **kwargs):  # stands in for a CUDA-event benchmark
        seen.append(gpu_lock._get().mode)
        return 1.0

    if harness_hook:
        monkeypatch.setattr(benchmarking, "_gpu_benchmark_lock_context", None)
        fake_benchmark_gpu = benchmarking.gpu_benchmark_lock(fake_benchmark_gpu)
    else:
        monkeypatch.delattr(benchmarking, "set_gpu_benchmark_lock_context")
    monkeypatch.setattr(benchmarking.InductorBenchmarker, "benchmark_gpu", fake_benchmark_gpu)
    gpu_lock.hold_shared()
    try:
        assert gpu_lock.hook_inductor_benchmarks()
        benchmarking.InductorBenchmarker().benchmark_gpu(lambda: None)
        seen.append(gpu_lock._get().mode)
    finally:
        gpu_lock.release()
    return seen


def test_inductor_benchmarks_are_measurements_through_the_harness_hook(tmp_path: Path, monkeypatch) -> None:
    import pytest
    from torch._inductor.runtime import benchmarking

    if not hasattr(benchmarking, "set_gpu_benchmark_lock_context"):
        pytest.skip("this torch has no GPU benchmark lock hook (the next test covers the older way)")
    assert _modes_inside_inductor_benchmarks(tmp_path, monkeypatch, harness_hook=True) == [2, 1]  # exclusive, shared


def test_inductor_benchmarks_are_measurements_on_an_older_torch(tmp_path: Path, monkeypatch) -> None:
    assert _modes_inside_inductor_benchmarks(tmp_path, monkeypatch, harness_hook=False) == [2, 1]


def test_long_holds_are_logged_by_job_and_summed(tmp_path: Path, monkeypatch) -> None:
    # A parallel bench reports which jobs held the device how long (results.json's gpu_lock_holds).
    path = str(tmp_path / "gpu.lock")
    monkeypatch.setenv(gpu_lock.ENV, path)
    monkeypatch.setattr(gpu_lock, "_lock", None)
    monkeypatch.setattr(gpu_lock, "HOLD_LOG_MIN_S", 0.05)
    gpu_lock.hold_shared(label="reference")
    time.sleep(0.1)
    with gpu_lock.exclusive():
        time.sleep(0.06)
    gpu_lock.release()  # the shared hold taken again after the measurement: too short to log
    gpu_lock.hold_shared()
    time.sleep(0.07)
    gpu_lock.release()
    summary = gpu_lock.hold_summary(path)
    assert list(summary) == ["reference shared", "reference exclusive"]  # longest total first
    assert summary["reference shared"]["holds"] == 2 and summary["reference exclusive"]["holds"] == 1
    assert 0.15 <= summary["reference shared"]["total_s"] < 1 and summary["reference shared"]["max_s"] >= 0.1
    with open(path + ".holds", "a") as fh:
        fh.write("not json\n")  # a torn or foreign line is skipped
    assert gpu_lock.hold_summary(path) == summary
    assert gpu_lock.hold_summary(str(tmp_path / "none.lock")) == {}
    monkeypatch.setattr(gpu_lock, "_lock", None)


def _stepping_sharer(path: str, steps: int, step_s: float, log: str) -> None:
    """A job's shared work in steps (trials) with a give_way() between them."""
    import os

    os.environ[gpu_lock.ENV] = path
    gpu_lock.hold_shared()
    gave = 0
    for _ in range(steps):
        gave += gpu_lock.give_way()
        time.sleep(step_s)
    gpu_lock.release()
    with open(log, "a") as fh:
        fh.write(f"sharer {gave} {time.monotonic():.3f}\n")


def test_a_stepping_sharer_gives_way_to_a_waiting_measurement(tmp_path: Path) -> None:
    """A sharer of 16 steps of 0.25 s (4 s in all) that gives way between steps: a measurement that asks 1 s in
    runs in the middle of the sharer's job (not after it), and the sharer gave way once — for that measurement."""
    log = tmp_path / "log"
    ctx = mp.get_context("spawn")
    lock = str(tmp_path / "gpu.lock")
    sharer = ctx.Process(target=_stepping_sharer, args=(lock, 16, 0.25, str(log)))
    sharer.start()
    time.sleep(1.0)
    measurement = ctx.Process(target=_worker, args=(lock, "exclusive", 0.2, str(log), 0.0))
    measurement.start()
    for p in (sharer, measurement):
        p.join(30)
        assert p.exitcode == 0
    lines = log.read_text().splitlines()
    began = next(float(line.split()[1]) for line in lines if line.startswith("exclusive"))
    gave, sharer_end = next(line.split()[1:] for line in lines if line.startswith("sharer"))
    assert began < float(sharer_end) - 0.5, lines  # it did not wait for the whole job
    assert gave == "1", lines
