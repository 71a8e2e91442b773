"""No row lost to a slow baseline (issue 28): a correct, timed kernel is a row the moment it is judged; the compile
baselines are timed in a job of their own beside the search; what they have not finished is ``pending`` in the
row, and ``--resume`` times only that (or takes it from the baseline cache) without running the problem again."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kernelwright.bench import rows, runner
from kernelwright.bench.report import markdown, results_document
from kernelwright.jobs import Measurement
from kernelwright.search.db import RunDB
from kernelwright.verify import verifier
from kernelwright.verify.records import Verdict, VerifyOptions
from kernelwright.verify.verifier import BaselineTimings

HERE = Path(__file__).resolve().parents[1]
RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "runs" / "argmax_lastdim"
SOFTMAX = HERE / "verify" / "problems" / "softmax.py"
COMPILES = ("compile", "compile_max_autotune")


def _verdict() -> Verdict:
    return Verdict.from_json(json.loads((RUN / "verdict.json").read_text()))


def _timed_row(task: runner.Task) -> dict:
    """What a GPU verify without the side baselines makes: the kernel and eager timed, the compile modes not."""
    verdict = _verdict()
    verdict = replace(verdict, timing={k: v for k, v in verdict.timing.items() if k not in task.side_baselines})
    return rows.row_from_verdict(verdict, name=task.problem.name, path=str(task.problem.path), mode="optimize")


class FakeBaselines:
    """time_baselines as the side job sees it: each call answers from ``plan`` (name -> "ok" | "cut" | "failed")."""

    def __init__(self, *plans: dict[str, str]) -> None:
        self.plans, self.calls = list(plans), []
        self.timing = _verdict().timing

    def __call__(self, problem, names, options: VerifyOptions) -> BaselineTimings:
        plan = self.plans.pop(0)
        self.calls.append((Path(problem).name, tuple(names)))
        assert options.device == "cuda" and options.deadline is not None
        measured = {n: self.timing[n] if plan[n] == "ok" else None for n in names}
        return BaselineTimings(measured, cut=tuple(n for n in names if plan[n] == "cut"))


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(runner, "machine", lambda: {"host": "test", "device": "NVIDIA H200"})
    problem = runner.BenchProblem("argmax", tmp_path / "argmax.py")
    problem.path.write_text("# a problem file's content keys its rows\n")
    settings = runner.BenchSettings(out_dir=tmp_path / "out", device="cuda", budget_per_problem_s=60.0,
                                    verify_limit_s=60.0, db_path=tmp_path / "runs.sqlite")
    runs: list[runner.Task] = []

    def run_problem(task: runner.Task, started: float):
        runs.append(task)
        modes = runner._verify_options(task)["compile_modes"]  # the winner's verify leaves them to the side job
        assert not set(modes) & set(task.side_baselines) and set(modes) <= set(task.reuse_baselines)
        return _timed_row(task), {"eager": _verdict().timing["eager"].to_json()}

    monkeypatch.setattr(runner, "_run_problem", run_problem)
    return problem, settings, runs


def test_a_correct_row_stands_while_its_compile_baselines_are_timed_beside_it(bench, monkeypatch) -> None:
    problem, settings, runs = bench
    side = FakeBaselines({"compile": "ok", "compile_max_autotune": "cut"}, {"compile_max_autotune": "ok"})
    monkeypatch.setattr(verifier, "time_baselines", side)

    first = runner.run_bench([problem], settings).rows[0]
    assert [t.side_baselines for t in runs] == [COMPILES]
    assert first["status"] == "passed" and first["pending"] == ["compile_max_autotune"]
    assert first["speedup"]["compile"] == pytest.approx(first["ms"]["compile"] / first["ms"]["candidate"])
    assert first["speedup"]["compile_max_autotune"] is None and first["baselines_later"] == ["compile"]

    # The report says which rows wait, and never prints a pending baseline as a missing one.
    document = results_document(runner.BenchOutcome(rows=[first], machine={}, settings=settings))
    assert document["summary"]["pending"]["compile_max_autotune"] == ["argmax"]
    text = markdown(document)
    assert "max-autotune for 1 (argmax)" in text and "| pending | " in text

    # --resume: only the pending baseline is timed; the problem is not run again.
    second = runner.run_bench([problem], replace(settings, resume=True)).rows[0]
    assert len(runs) == 1 and side.calls == [("argmax.py", COMPILES), ("argmax.py", ("compile_max_autotune",))]
    assert second["pending"] == [] and second["speedup"]["compile_max_autotune"] > 0
    assert second["ms"]["candidate"] == first["ms"]["candidate"]

    # A third call finds the row whole: nothing runs.
    third = runner.run_bench([problem], replace(settings, resume=True)).rows[0]
    assert len(runs) == 1 and len(side.calls) == 2 and third["speedup"] == second["speedup"]


def test_a_pending_baseline_the_cache_holds_is_filled_without_running_anything(bench, monkeypatch) -> None:
    problem, settings, runs = bench
    side = FakeBaselines({"compile": "cut", "compile_max_autotune": "cut"})
    monkeypatch.setattr(verifier, "time_baselines", side)
    first = runner.run_bench([problem], settings).rows[0]
    assert first["pending"] == list(COMPILES)

    # Another bench of this problem timed them meanwhile (the cache is keyed without the kernel's side).
    where = runner.machine()
    with RunDB(settings.db_path) as db:
        key = runner.baseline_key(problem, settings, where)
        old = db.baseline_timings(key)[0]
        db.store_baseline_timings(key, {**old, **{n: side.timing[n].to_json() for n in COMPILES}})
    resumed = runner.run_bench([problem], replace(settings, resume=True)).rows[0]
    assert len(runs) == 1 and len(side.calls) == 1
    assert resumed["pending"] == [] and all(resumed["speedup"][n] for n in COMPILES)


def test_a_failed_baseline_is_not_pending_and_a_fresh_bench_reuses_the_measured_ones(bench, monkeypatch) -> None:
    problem, settings, runs = bench
    side = FakeBaselines({"compile": "failed", "compile_max_autotune": "ok"}, {})
    monkeypatch.setattr(verifier, "time_baselines", side)
    row = runner.run_bench([problem], settings).rows[0]
    assert row["pending"] == [] and row["speedup"]["compile"] is None and row["speedup"]["compile_max_autotune"]
    # A new bench (no --resume) of the same problem: max-autotune comes from the cache, compile is tried again.
    side.plans.append({"compile": "ok"})
    runner.run_bench([problem], settings)
    assert runs[-1].side_baselines == ("compile",) and "compile_max_autotune" in runs[-1].reuse_baselines


def test_a_verify_whose_own_baselines_were_cut_is_a_row_with_them_pending() -> None:
    task = runner.Task(runner.BenchProblem("p", Path("p.py")), runner.BenchSettings(out_dir=Path("."), device="cuda"),
                       side_baselines=COMPILES)
    row = {**_timed_row(task), "notes": ["baselines-cut"]}
    row["ms"] = {**row["ms"], "eager": None}
    assert runner._pending_in_verify(row, task)["pending"] == ["eager"]
    assert not runner._cut_short({**row, "pending": ["eager"]})
    assert runner._cut_short({**row, "pending": []})  # a row of an earlier version: run again
    assert runner._pending_in_verify({**row, "timed": False}, task) == {**row, "timed": False}


def test_fill_baselines_sets_the_ratio_and_the_sol_score() -> None:
    row = {"ms": {"candidate": 2.0, "eager": None, "compile": None, "compile_max_autotune": 1.0},
           "speedup": {"eager": None, "compile": None, "compile_max_autotune": 0.5}, "floor_ms": 1.0,
           "sol_score": None, "pending": ["eager", "compile"], "baselines_later": []}
    filled = rows.fill_baselines(row, {"eager": 4.0, "compile": None, "compile_max_autotune": 9.0})
    assert filled["speedup"]["eager"] == 2.0 and filled["sol_score"] == pytest.approx(2 / 3)
    assert filled["speedup"]["compile"] is None and filled["pending"] == []  # failed: not pending, no speedup
    assert filled["ms"]["compile_max_autotune"] == 1.0  # not pending: untouched
    assert filled["baselines_later"] == ["eager"]
    assert rows.fill_baselines(row, {}) is row


def test_time_baselines_runs_only_the_problems_model_and_says_what_failed_or_was_cut() -> None:
    # The CPU cannot time (the baseline job measures with CUDA events): a note says so, nothing is pending.
    result = verifier.time_baselines(SOFTMAX, ["eager"], VerifyOptions(device="cpu", seed=3))
    assert result.measured == {"eager": None} and result.cut == ()
    assert any("baseline job failed" in n for n in result.notes)
    late = verifier.time_baselines(SOFTMAX, COMPILES, VerifyOptions(device="cpu", seed=3,
                                                                    deadline=time.monotonic() - 1))
    assert late.cut == COMPILES and late.measured == dict.fromkeys(COMPILES)


def test_measurements_round_trip_through_the_cache_json() -> None:
    m = _verdict().timing["eager"]
    assert runner._median(m.to_json()) == m.median_ms and isinstance(Measurement.from_json(m.to_json()), Measurement)
    assert runner._median({"nonsense": 1}) is None
