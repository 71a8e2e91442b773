"""Which problems a bench covers, how solutions match them, and the scores over rows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernelwright.bench import rows, scores
from kernelwright.bench.collect import collect_problems, match_solutions
from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.errors import InputError

PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n" \
          "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n"


def _write(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(PROBLEM)


def test_folders_are_read_in_kernelbench_order_and_non_problems_skipped(tmp_path: Path) -> None:
    _write(tmp_path / "level1", "10_B.py", "2_A.py", "1_C.py")
    (tmp_path / "level1" / "helpers.py").write_text("x = 1\n")
    names = [p.name for p in collect_problems([tmp_path / "level1"])]
    assert names == ["1_C", "2_A", "10_B"]


@pytest.mark.parametrize("make, args, message", [
    (lambda t: (t / "empty").mkdir(), ["empty"], "holds no problem files"),
    (lambda t: None, ["missing"], "does not exist"),
    (lambda t: (t / "notes.py").write_text("x = 1\n"), ["notes.py"], "is not a problem file"),
])
def test_bad_problem_arguments_are_one_line_errors(tmp_path: Path, make, args, message) -> None:
    make(tmp_path)
    with pytest.raises(InputError, match=message):
        collect_problems([tmp_path / a for a in args])


def test_solutions_match_by_file_name_and_an_empty_match_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "p", "19_ReLU.py", "20_Tanh.py", "21_Sigmoid.py")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "19_ReLU.py").write_text("# exact\n")
    (tmp_path / "s" / "20_Tanh_sample0.py").write_text("# prefixed\n")
    matched = {p.name: p.solution for p in match_solutions(collect_problems([tmp_path / "p"]), tmp_path / "s")}
    assert matched["19_ReLU"].name == "19_ReLU.py" and matched["20_Tanh"].name == "20_Tanh_sample0.py"
    assert matched["21_Sigmoid"] is None
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "unrelated.py").write_text("# nothing\n")
    with pytest.raises(InputError, match="no file in .* matches a problem"):
        match_solutions(collect_problems([tmp_path / "p"]), tmp_path / "other")


def _row(name: str, status: str, eager: float | None = None, mat: float | None = None) -> dict:
    r = rows.failure_row(name=name, path=f"{name}.py", mode="optimize", status=status, message="")
    if eager is not None:
        r["timed"] = True
        r["speedup"] = {"eager": eager, "compile": mat, "compile_max_autotune": mat}
    return r


def test_fast_p_counts_every_problem_and_only_passes() -> None:
    table = [_row("a", "passed", 3.0, 1.2), _row("b", "passed", 1.2, 0.9), _row("c", "rejected", 9.0, 9.0),
             _row("d", "unsupported")]
    s = scores.summary(table)
    assert s["fast_0"] == 0.5
    assert s["fast_p"]["eager"] == {"1": 0.5, "1.5": 0.25, "2": 0.25}  # the exploit's 9x counts for nothing
    assert s["fast_p"]["compile_max_autotune"]["1"] == 0.25
    assert math.isclose(s["geomean_speedup"]["eager"], math.sqrt(3.0 * 1.2))
    assert s["statuses"] == {"passed": 2, "rejected": 1, "unsupported": 1}


def test_nothing_timed_gives_no_speed_scores_rather_than_zero() -> None:
    s = scores.summary([_row("a", "passed"), _row("b", "incorrect")])
    assert s["fast_0"] == 0.5
    assert s["fast_p"]["eager"]["1"] is None and s["geomean_speedup"]["eager"] is None


def test_speed_of_light_score() -> None:
    assert rows.sol_score(2.0, 1.0, 0.0) == 0.5  # half the gap to the floor closed
    assert rows.sol_score(2.0, 3.0, 1.0) == 0.0  # slower than eager
    assert rows.sol_score(2.0, 0.5, 1.0) == 1.0  # "below the floor" is clipped (the verifier flags it)
    assert rows.sol_score(None, 1.0, 0.5) is None


def test_a_problem_never_reaches_past_the_whole_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.bench import runner

    monkeypatch.setattr(runner.time, "monotonic", lambda: 1000.0)
    settings = runner.BenchSettings(out_dir=tmp_path, device="cpu", budget_per_problem_s=120.0, verify_limit_s=600.0)
    task = runner.Task(problem=runner.BenchProblem("p", tmp_path / "p.py"), settings=settings)
    assert runner._within_total(task, NO_DEADLINE) is task
    assert runner._within_total(task, Deadline(1000.0 + 900.0)) is task  # search and verify both fit
    cut = runner._within_total(task, Deadline(1000.0 + 300.0)).settings  # search keeps its budget, verify the rest
    assert (cut.budget_per_problem_s, cut.verify_limit_s) == (120.0, 180.0)
    cut = runner._within_total(task, Deadline(1000.0 + 60.0)).settings
    assert (cut.budget_per_problem_s, cut.verify_limit_s) == (60.0, 0.0)


def test_a_problem_that_spends_its_own_budget_does_not_stop_the_bench(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A timeout row (its own search and verify allowance spent) is followed by the next problem; only a problem
    # whose budget the bench's total cut short ends the bench (a level-2 bench under `--budget 140m` stopped at its
    # first timeout with 103 minutes left).
    from kernelwright.bench import runner

    clock = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(runner, "machine", lambda: {"host": "test"})

    def run_task(task: runner.Task) -> tuple[dict, dict]:
        clock[0] += task.settings.budget_per_problem_s + task.settings.verify_limit_s
        row = rows.failure_row(name=task.problem.name, path=str(task.problem.path), mode="optimize",
                               status="timeout", message="the budget ran out")
        return {**row, "findings": ["budget-spent"]}, {}

    monkeypatch.setattr(runner, "run_task", run_task)
    problems = [runner.BenchProblem(f"p{i}", tmp_path / f"p{i}.py") for i in range(4)]
    for p in problems:
        p.path.write_text("")
    settings = runner.BenchSettings(out_dir=tmp_path, device="cpu", budget_per_problem_s=100.0,
                                    verify_limit_s=50.0, budget_s=400.0, db_path=tmp_path / "runs.sqlite")
    statuses = [r["status"] for r in runner.run_bench(problems, settings).rows]
    # 150 s each: two whole, the third cut by the total (100 s left), the fourth never started.
    assert statuses == ["timeout", "timeout", "timeout", rows.NOT_RUN]


def test_a_row_a_budget_cut_short_is_not_finished() -> None:
    # --resume runs such rows again: their verdicts say nothing about the kernel, only about the clock.
    from kernelwright.bench.runner import _cut_short

    assert _cut_short({"findings": ["budget-spent"], "notes": []})
    assert _cut_short({"findings": [], "notes": ["baselines-cut", "low-occupancy"]})
    assert not _cut_short({"findings": ["mismatch"], "notes": ["baseline-failed"]})


def test_a_row_key_follows_the_code_that_made_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --resume reuses a row only for the same kernelwright source: a changed template is a new row, although the
    # version number stays the same.
    from kernelwright.bench import runner

    problem = runner.BenchProblem("p", tmp_path / "p.py")
    problem.path.write_text("x = 1\n")
    settings = runner.BenchSettings(out_dir=tmp_path, device="cpu")
    where = runner.machine()
    assert len(where["source"]) == 24 and where["source"] == runner.source_fingerprint()
    changed = {**where, "source": "0" * 24}
    assert runner.row_key(problem, settings, where) != runner.row_key(problem, settings, changed)
    assert runner.row_key(problem, settings, where) == runner.row_key(problem, settings, runner.machine())
    assert runner.baseline_key(problem, settings, where) == runner.baseline_key(problem, settings, changed)
