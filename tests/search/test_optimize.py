"""kernelwright optimize: end to end on the CPU, and the search's budget and Ctrl-C behaviour with a stub timer."""

from __future__ import annotations

import csv
import json
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.errors import InputError
from kernelwright.jobs import Measurement
from kernelwright.records import Status
from kernelwright.search.optimize import optimize
from kernelwright.search.records import Candidate, Outcome
from kernelwright.verify.records import Verdict

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x, y):
        return F.gelu(x + self.bias) * y + 1.0


rows = 48
features = 200


def get_inputs():
    return [torch.randn(rows, features), torch.randn(rows, features)]


def get_init_inputs():
    return [features]
"""


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    path = tmp_path / "bias_gelu_mul.py"
    path.write_text(textwrap.dedent(PROBLEM))
    return path


def test_cpu_run_proves_the_default_candidate_and_says_nothing_was_timed(problem: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = main(["optimize", str(problem), "--out", str(out), "--device", "cpu"])
    assert code == 0
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "passed" and verdict["timing"] == {}
    assert any(k["arch"] == "sm_90a" for k in verdict["instructions"])
    best = (out / "best.py").read_text()
    assert "class ModelNew(nn.Module)" in best and "@triton.jit" in best
    assert "self.bias = nn.Parameter(torch.randn(features))" in best  # the reference's own __init__
    rows = list(csv.DictReader((out / "candidates.csv").open()))
    assert rows[0]["status"] == "passed" and rows[0]["families"] == "pointwise"
    report = (out / "report.md").read_text()
    assert "Nothing was timed" in report and "group 0: pointwise" in report


def test_a_problem_no_template_covers_is_a_clear_input_error(tmp_path: Path) -> None:
    path = tmp_path / "sort_problem.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return torch.sort(x, dim=-1).values

        def get_inputs():
            return [torch.randn(8, 16)]

        def get_init_inputs():
            return []
    """))
    with pytest.raises(InputError, match=r"no template covers .*aten sort.*--generator llm"):
        optimize(path, out_dir=tmp_path / "run", device="cpu")


def _measured(ms: float) -> Measurement:
    return Measurement(median_ms=ms, min_ms=ms, q1_ms=ms, q3_ms=ms, mean_ms=ms, reps=1, host_ms_per_call=ms,
                       flush_ms=0.0, unexplained_ms_per_call=0.0)


@dataclass
class StubEvaluator:
    """Times candidates from a table instead of a GPU; can run out the budget or raise KeyboardInterrupt."""

    times: dict[int, float]
    clock: list[float]
    interrupt_after: int | None = None
    step_s: float = 10.0
    timed: bool = True
    seen: list[int] = field(default_factory=list)
    verified: list[int] = field(default_factory=list)
    verify_deadlines: list[float | None] = field(default_factory=list)

    def time(self, candidates: Sequence[Candidate], *, deadline: float | None = None) -> Iterator[Outcome]:
        for c in candidates:
            if self.interrupt_after is not None and len(self.seen) >= self.interrupt_after:
                raise KeyboardInterrupt
            self.seen.append(c.index)
            self.clock[0] += self.step_s
            yield Outcome(candidate=c, status="timed", median_ms=self.times.get(c.index, 1.0))

    def verify(self, candidate: Candidate, *, compile_baseline: bool, deadline=None) -> Verdict:
        self.verified.append(candidate.index)
        self.verify_deadlines.append(deadline)
        return Verdict(status=Status.PASSED, message="stub pass", clean=True, problem="p", candidate=str(candidate.path),
                       problem_sha256="", candidate_sha256="", seed=0, device={"type": "stub"}, tolerance={},
                       timing={"candidate": _measured(self.times.get(candidate.index, 1.0))})


def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    clock = [1000.0]
    import kernelwright.search.optimize as opt

    monkeypatch.setattr(opt.time, "monotonic", lambda: clock[0])
    return clock


def test_tuning_stops_when_the_budget_is_spent(problem: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _fake_clock(monkeypatch)
    stub = StubEvaluator(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=10.0)
    result = optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=40.0, evaluator=stub)
    # 75% of 40 s for tuning at 10 s per candidate: the search stops after the third timing.
    assert stub.seen == [0, 1, 2]
    assert result.best is not None and result.best.candidate.index == 2
    assert stub.verified == [2]  # the fastest finalist passed first
    assert (tmp_path / "run" / "best.py").read_text() == result.best.candidate.path.read_text()


def test_an_allowance_gives_the_search_the_budget_and_the_verify_more(problem: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A bench wants whole rows: the search has all 40 s (a fourth timing), the verify 100 s past the budget.
    clock = _fake_clock(monkeypatch)
    stub = StubEvaluator(times={0: 2.0, 1: 1.5, 2: 0.5, 3: 3.0}, clock=clock, step_s=10.0)
    optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=40.0, evaluator=stub, verify_allowance_s=100.0)
    assert stub.seen == [0, 1, 2, 3]
    assert [d.at for d in stub.verify_deadlines] == [1000.0 + 40.0 + 100.0]
    plain = StubEvaluator(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=10.0)
    start = clock[0]
    optimize(problem, out_dir=tmp_path / "plain", device="cpu", budget_s=40.0, evaluator=plain)
    assert [d.at for d in plain.verify_deadlines] == [start + 40.0]  # without one, the budget is a promise, verify included


def test_the_default_is_timed_with_group_zeros_alternatives(problem: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """One evaluator call (one worker, one wait for the GPU lock) for the default and every other configuration
    of group 0: timed alone, the default cost a call of its own, and a parallel bench's 60 s search on the H200
    timed nothing else (run 38)."""
    clock = _fake_clock(monkeypatch)
    monkeypatch.setenv("KERNELWRIGHT_PTX_REWRITES", "0")  # the rewrite stage times the leader again (tested below)

    class Calls(StubEvaluator):
        def time(self, candidates, *, deadline=None):
            self.calls = [*getattr(self, "calls", []), [c.index for c in candidates]]
            return super().time(candidates, deadline=deadline)

    stub = Calls(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=1.0)
    optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=3600.0, evaluator=stub,
             verify_allowance_s=100.0)
    assert stub.calls[0][0] == 0 and len(stub.calls[0]) > 1  # the default first, its alternatives beside it
    assert sorted(stub.seen) == sorted(set(stub.seen))  # each candidate timed once


@pytest.mark.parametrize("faster", [True, False])
def test_ptx_rewrites_are_timed_beside_the_leader_and_kept_only_where_faster(
        problem: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faster: bool) -> None:
    """After tuning, the leader's PTX rewrites are timed in one batch with the leader itself; one becomes a finalist
    (and here the winner) only where it times at least 1% under that batch's plain figure; every trial is in the
    report, kept or not."""
    from kernelwright.generate.ptx_variant import MARK, rewrite_passes
    from kernelwright.search.rewrites import PASS_SETS

    clock = _fake_clock(monkeypatch)

    class ByLabel(StubEvaluator):
        def time(self, candidates, *, deadline=None):
            self.calls = [*getattr(self, "calls", []), [c.label for c in candidates]]
            for c in candidates:
                self.times[c.index] = (0.45 if faster and c.label == "ptx no-allocate-loads" else
                                       0.499 if c.label.startswith("ptx") else self.times.get(c.index, 1.0))
            return super().time(candidates, deadline=deadline)

    stub = ByLabel(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=1.0)
    result = optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=3600.0, evaluator=stub,
                      verify_allowance_s=100.0)
    (leader,) = [o.candidate for o in result.outcomes if o.candidate.index == 2]
    assert stub.calls[-1] == [leader.label] + [f"ptx {'+'.join(p)}" for p in PASS_SETS]  # one batch, leader first
    assert [t.passes for t in result.rewrites] == list(PASS_SETS)
    assert all(t.base == 2 and t.base_ms == 0.5 for t in result.rewrites)
    assert [t.kept for t in result.rewrites] == [faster] + [False] * (len(PASS_SETS) - 1)  # 0.499: inside the margin
    best = result.best
    assert best is not None
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## PTX rewrites" in report and "| no-allocate-loads + streaming-stores |" in report
    if faster:
        assert best.candidate.ptx_passes == ("no-allocate-loads",) and stub.verified[0] == best.candidate.index
        best_py = (tmp_path / "run" / "best.py").read_text()
        assert MARK in best_py and rewrite_passes(best_py) == ("no-allocate-loads",)
        assert "1.111x | yes |" in report
    else:
        assert best.candidate.index == 2 and stub.verified == [2]  # no rewrite reached the verifier
    if not faster:  # no finalist passes: the fastest timed candidate is written, never a rewrite not kept
        class Failing(ByLabel):
            def verify(self, candidate, *, compile_baseline, deadline=None):
                return replace(super().verify(candidate, compile_baseline=compile_baseline, deadline=deadline),
                               status=Status.INCORRECT, message="stub failure")

        failing = Failing(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=1.0)
        result = optimize(problem, out_dir=tmp_path / "failing", device="cpu", budget_s=3600.0, evaluator=failing,
                          verify_allowance_s=100.0)
        assert result.best is not None and not result.best.candidate.ptx_passes
    off = ByLabel(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=1.0)
    result = optimize(problem, out_dir=tmp_path / "off", device="cpu", budget_s=3600.0, evaluator=off,
                      verify_allowance_s=100.0, ptx_rewrites=False)  # --no-ptx-rewrites
    assert result.rewrites == () and not any(label.startswith("ptx") for call in off.calls for label in call)


def test_groups_are_tuned_heaviest_first(tmp_path: Path) -> None:
    """A softmax feeding a matmul: the matmul's group (2 x 64 x 96 x 128 multiply-adds against the softmax's one
    operation an element) is tuned first, whatever its place in the graph."""
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan
    from kernelwright.search.optimize import group_order

    path = tmp_path / "softmax_matmul.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x, w):
                return torch.softmax(x, dim=-1) @ w

        def get_inputs():
            return [torch.randn(64, 96), torch.randn(96, 128)]

        def get_init_inputs():
            return []
    """))
    the_plan = plan(capture(path), load_families())
    families = [g.family for g in the_plan.groups]
    assert families.index("gemm") > 0  # the softmax comes first in the graph
    assert [families[g] for g in group_order(the_plan)][0] == "gemm"


def test_ctrl_c_keeps_the_best_so_far(problem: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _fake_clock(monkeypatch)
    stub = StubEvaluator(times={0: 2.0, 1: 0.7, 2: 1.0}, clock=clock, interrupt_after=3, step_s=1.0)
    result = optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=3600.0, evaluator=stub)
    assert result.interrupted
    assert result.best is not None and result.best.candidate.index == 1 and result.best.verdict is None
    report = (tmp_path / "run" / "report.md").read_text()
    assert "interrupted" in report and "not verified" in report
    assert (tmp_path / "run" / "best.py").exists() and not (tmp_path / "run" / "verdict.json").exists()


def test_reduced_sizes_shrink_input_only_constants_by_one_factor(tmp_path: Path) -> None:
    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import reduced_sizes

    path = tmp_path / "heads_softmax.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, heads, features):
                super().__init__()
                self.heads = heads
                self.scale = nn.Parameter(torch.ones(features))

            def forward(self, x, y):
                b, t, h = x.shape
                return x.view(b, t, self.heads, h // self.heads).softmax(-1).flatten(2) + y @ self.scale

        batch = 8
        tokens = 512
        hidden = 1024
        heads = 16
        features = 256

        def get_inputs():
            return [torch.randn(batch, tokens, hidden), torch.randn(batch, tokens, 1, features)]

        def get_init_inputs():
            return [heads, features]
    """))
    overrides = reduced_sizes(read_problem(path), max_elements=1 << 16)
    # heads and batch are structure (small); features sizes a parameter, so it must not change.
    assert set(overrides) == {"tokens", "hidden"}
    assert overrides["hidden"] * 512 == overrides["tokens"] * 1024  # one common factor
    assert overrides["tokens"] * overrides["hidden"] * 8 <= 1 << 16


HEAVY_LINEAR = """
import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 512
n_in = 1024
n_out = 768
head_dim = 64


class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return F.relu(self.fc(x)) * head_dim ** -0.5  # read by Model itself: a candidate's copy keeps it


def get_inputs():
    return [torch.randn(tokens, n_in)]


def get_init_inputs():
    return [n_in, n_out]
"""


def test_weights_shrink_only_where_the_candidate_is_the_same_file(tmp_path: Path) -> None:
    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import reduced_sizes
    from kernelwright.search.candidates import same_candidate_at, template_builder

    path = tmp_path / "heavy_linear.py"
    path.write_text(HEAVY_LINEAR)
    problem = read_problem(path)
    assert set(reduced_sizes(problem)) == {"tokens"}  # the inputs alone
    broad = reduced_sizes(problem, constructor=True)
    assert set(broad) == {"tokens", "n_in", "n_out"}  # not `head_dim`: Model's own code names it
    _, builder = template_builder(path, tmp_path / "candidates", arch="sm_90a")
    candidate = builder.build((0,) * len(builder.spaces), "default")
    assert same_candidate_at(path, candidate, broad)
    # a number the templates bake in from a size (the scale) makes the file differ: not the same
    assert not same_candidate_at(path, candidate, {**broad, "head_dim": 128})


@pytest.mark.slow
def test_cpu_run_of_heavy_weights_checks_at_reduced_weights(tmp_path: Path) -> None:
    path = tmp_path / "heavy_linear.py"
    path.write_text(HEAVY_LINEAR)
    result = optimize(path, out_dir=tmp_path / "run", device="cpu")
    verdict = result.best.verdict
    assert verdict.status is Status.PASSED, verdict.message
    assert {"n_in", "n_out"} <= set(verdict.size_overrides)
    assert "head_dim" not in verdict.size_overrides


def test_the_template_search_is_a_run_in_the_run_database(problem: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.search.db import RunDB

    clock = _fake_clock(monkeypatch)
    stub = StubEvaluator(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=10.0)
    db_path = tmp_path / "runs.sqlite"
    result = optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=40.0, evaluator=stub,
                      db_path=db_path)
    with RunDB(db_path) as db:
        (run,) = db.runs()
        assert (run.generator, run.strategy, run.status) == ("templates", "coordinate-descent", "finished")
        rows = db.candidates(run.id)
    assert [r.origin for r in rows] == ["template"] * 3
    assert [r.median_ms for r in rows] == [2.0, 1.5, 0.5]
    verified = [r for r in rows if r.verdict_id is not None]
    assert len(verified) == 1 and verified[0].sha256 == result.best.candidate.sha256


def test_a_budget_spent_before_any_timing_still_verifies_the_default(problem: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Four problems sharing one GPU waited past a 30 s tuning budget for the GPU lock (H200, 2026-12-02): the
    search then verified nothing and ended empty. The default candidate must still get the full protocol."""
    clock = _fake_clock(monkeypatch)

    class NothingTimed(StubEvaluator):
        def time(self, candidates, *, deadline=None):
            self.clock[0] += 100.0  # waited for the GPU past the deadline; the worker timed nothing
            return iter(())

    stub = NothingTimed(times={0: 1.0}, clock=clock)
    result = optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=30.0, evaluator=stub,
                      db_path=tmp_path / "runs.sqlite")
    assert stub.verified == [0]
    assert result.best is not None and result.best.verdict is not None and result.best.verdict.passed


def test_the_progress_line_ends_on_the_verdict(problem: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from kernelwright.search.progress import Progress

    clock = _fake_clock(monkeypatch)
    stream = io.StringIO()
    stub = StubEvaluator(times={0: 2.0, 1: 1.5, 2: 0.5}, clock=clock, step_s=10.0)
    optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=40.0, evaluator=stub,
             progress=Progress(stream=stream), db_path=tmp_path / "runs.sqlite")
    last = stream.getvalue().strip().splitlines()[-1]
    assert "verifying" not in last and "c002 passed" in last and "best 0.5000 ms" in last, last


def test_out_naming_a_file_is_a_clear_input_error(problem: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine")
    with pytest.raises(InputError, match="is a file"):
        optimize(problem, out_dir=taken, device="cpu")
    assert taken.read_text() == "mine"


def test_a_problem_whose_forward_raises_is_told_to_fix_the_file_and_leaves_no_folder(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return x @ torch.randn(3, 3)  # the inputs are 4 wide

        def get_inputs():
            return [torch.randn(2, 4)]

        def get_init_inputs():
            return []
    """))
    out = tmp_path / "run"
    with pytest.raises(InputError, match=r"forward raised RuntimeError.*fix the problem file"):
        optimize(path, out_dir=out, device="cpu")
    assert not out.exists()


def test_reduced_sizes_count_the_outputs_too(tmp_path: Path) -> None:
    # A tall-skinny product: small inputs, a large output. Budgeting the inputs alone left it at full size.
    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import reduced_sizes

    path = tmp_path / "tall_skinny.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, a, b):
                return a @ b

        M = 16384
        K = 8

        def get_inputs():
            return [torch.randn(M, K), torch.randn(K, M)]

        def get_init_inputs():
            return []
    """))
    overrides = reduced_sizes(read_problem(path), max_elements=1 << 18)
    assert set(overrides) == {"M"} and overrides["M"] ** 2 + 2 * overrides["M"] * 8 <= 1 << 18


def test_reduced_sizes_budget_the_work_too(tmp_path: Path) -> None:
    # Few elements, much work: a 2048 x 2048 linear over 64 rows fits the element budget, but its 5.4e8 FLOPs kept
    # the interpreter busy for minutes (level 2's fixed-channel convolutions and GEMMs): the batch shrinks until the
    # reference's FLOPs (counted on meta tensors) fit too.
    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import MAX_FLOPS, problem_flops, reduced_sizes

    path = tmp_path / "wide_linear.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.linear = nn.Linear(features, features)

            def forward(self, x):
                return torch.relu(self.linear(x))

        batch = 64
        features = 2048

        def get_inputs():
            return [torch.randn(batch, features)]

        def get_init_inputs():
            return [features]
    """))
    problem = read_problem(path)
    assert problem_flops(problem) > MAX_FLOPS
    overrides = reduced_sizes(problem, max_elements=1 << 18)
    assert set(overrides) == {"batch"} and problem_flops(problem, overrides) <= MAX_FLOPS


def test_reduced_sizes_budget_a_convolutions_tile_steps(tmp_path: Path) -> None:
    # A 3 x 5 x 7 transposed convolution does little arithmetic (under the FLOP budget at a batch of 8), but each of
    # its 105 taps is a tile step of the interpreter's implicit GEMM: level 1's `58_conv_transposed_3D` ran out of
    # its 6-minute proof at 8820 steps. The batch shrinks until the steps fit as well (here 12600 -> 1575), and the
    # literal 16 of the input's channels stays (meta tensors alone let a 4-channel input through this convolution).
    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import MAX_CONV_STEPS, problem_work, reduced_sizes

    path = tmp_path / "many_taps.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.conv = nn.ConvTranspose3d(channels, channels, (3, 5, 7))

            def forward(self, x):
                return self.conv(x)

        batch = 32
        depth = 1
        side = 4

        def get_inputs():
            return [torch.randn(batch, 16, depth, side, side)]

        def get_init_inputs():
            return [16]
    """))
    problem = read_problem(path)
    work = problem_work(problem)
    assert work.conv_steps > MAX_CONV_STEPS and work.fits(max_conv_steps=work.conv_steps)
    overrides = reduced_sizes(problem, max_elements=1 << 22)
    assert set(overrides) == {"batch"} and problem_work(problem, overrides).fits()


def test_conv_steps_count_the_tiles_each_kernel_walks() -> None:
    from kernelwright.problem.sizes import conv_steps

    # Conv2d 16 -> 96, 11 x 11: 2 x 7 x 7 = 98 output positions in two 64-row tiles, 2 column tiles, 121 taps, one
    # K step each.
    assert conv_steps((2, 16, 17, 17), (96, 16, 11, 11), (2, 96, 7, 7), stride=(1, 1), transposed=False,
                      groups=1) == 2 * 2 * 121 * 1
    # Depthwise 3 x 3 over 64 channels: the direct kernel, 1024 outputs a step per tap.
    assert conv_steps((2, 64, 10, 10), (64, 1, 3, 3), (2, 64, 8, 8), stride=(1, 1), transposed=False,
                      groups=64) == 8 * 9
    # Transposed 8 -> 12, groups 4, stride 2 (weight [C_in, C_out / groups, 3, 3]): an output phase gathers 2 x 2
    # taps; 121 outputs make 2 row tiles per group.
    assert conv_steps((1, 8, 5, 5), (8, 3, 3, 3), (1, 12, 11, 11), stride=(2, 2), transposed=True,
                      groups=4) == 2 * 4 * 1 * 4 * 1


def test_changed_sizes_carry_to_the_shapes_derived_from_them(tmp_path: Path) -> None:
    # `scale_shape = (out_features,)` (KernelBench level 2 `33_Gemm_Scale_BatchNorm`; 37 level-2 files derive such
    # shapes): changing out_features alone left scale_shape at 8192, so the model could not be built and the size
    # never shrank; the CPU proof ran out of time.
    from kernelwright.problem.files import import_from_path, read_problem
    from kernelwright.problem.sizes import apply, reduced_sizes

    path = tmp_path / "derived.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, features, scale_shape):
                super().__init__()
                self.linear = nn.Linear(features, features)
                self.scale = nn.Parameter(torch.randn(scale_shape))

            def forward(self, x):
                return self.linear(x) * self.scale

        batch = 64
        features = 1024
        scale_shape = (features,)
        doubled = scale_shape[0] * 2

        def get_inputs():
            return [torch.randn(batch, features)]

        def get_init_inputs():
            return [features, scale_shape]
    """))
    module = import_from_path(path, "derived_sizes")
    apply(module, {"features": 16})
    assert module.scale_shape == (16,) and module.doubled == 32
    apply(module, {"features": 1024, "doubled": 5})  # an override wins over its own derivation
    assert module.scale_shape == (1024,) and module.doubled == 5
    broad = reduced_sizes(read_problem(path), max_elements=1 << 14, constructor=True)
    assert "features" in broad


def test_sizes_written_as_numbers_in_shapes_shrink_too(tmp_path: Path) -> None:
    # KernelBench's level 3 writes its image size as a number — `torch.rand(batch_size, 3, 224, 224)` inside
    # get_inputs, or `input_shape = (batch_size, 3, 224, 224)` — and an MLP's widths as a list (`layer_sizes =
    # [16384, 16384]`): the reducer knew integer constants only, so such CPU proofs ran at full size and out of time.
    # Each distinct number is one size (`literal:96`): every occurrence changes at once, squares stay square.
    from kernelwright.problem.files import import_from_path, read_problem
    from kernelwright.problem.sizes import apply, reduced_sizes

    path = tmp_path / "literal_sizes.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, widths):
                super().__init__()
                self.conv = nn.Conv2d(3, widths[0], 3, padding=1)
                self.pool = nn.AdaptiveAvgPool2d(1)
                self.fc = nn.Linear(widths[0], widths[1])

            def forward(self, x, y):
                return self.fc(self.pool(self.conv(x)).flatten(1)) + y.mean()

        batch = 4
        layer_sizes = [512, 512]
        other_shape = (batch, 96, 96)

        def get_inputs():
            return [torch.rand(batch, 3, 96, 96), torch.rand(other_shape)]

        def get_init_inputs():
            return [layer_sizes]
    """))
    problem = read_problem(path)
    assert problem.size_literals == {"literal:96": 96, "literal:512": 512}
    module = import_from_path(path, "literal_sizes")
    apply(module, {"literal:96": 24, "literal:512": 64})
    x, y = module.get_inputs()
    assert x.shape == (4, 3, 24, 24) and y.shape == (4, 24, 24) and module.layer_sizes == [64, 64]
    apply(module, {"literal:96": 96, "literal:512": 512})
    assert module.get_inputs()[0].shape == (4, 3, 96, 96) and module.layer_sizes == [512, 512]
    inputs_only = reduced_sizes(problem, max_elements=1 << 12)
    assert set(inputs_only) == {"literal:96"}  # the widths reach the constructor: not without the candidate's check
    broad = reduced_sizes(problem, max_elements=1 << 12, constructor=True)
    assert {"literal:96", "literal:512"} <= set(broad)


def test_a_size_that_feeds_a_value_the_model_reads_never_shrinks(tmp_path: Path) -> None:
    # `scale = dim ** -0.5` and the forward reads `scale`: shrinking `dim` would derive another scale for the
    # reference while the candidate holds the full-size one (a review found it, 2026-12-02).
    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import named_by_model, reduced_sizes

    path = tmp_path / "scaled.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return x * scale

        batch = 4096
        dim = 4096
        scale = dim ** -0.5

        def get_inputs():
            return [torch.randn(batch, dim)]

        def get_init_inputs():
            return []
    """))
    problem = read_problem(path)
    assert {"scale", "dim"} <= named_by_model(problem)
    assert set(reduced_sizes(problem)) == {"batch"}


def test_reduced_sizes_never_make_the_inputs_at_full_size(tmp_path: Path) -> None:
    # Sizes are budgeted on meta tensors and only sizes within the budget are run for real: a problem whose inputs
    # no machine could hold (2**40 elements here) still reduces, at once. KernelBench's exclusive cumsum (4 GiB of
    # input) spent 119 s of its 141 s CPU check making inputs at full and halved sizes.
    import time

    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import reduced_sizes

    path = tmp_path / "huge.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return torch.cumsum(x, dim=1)

        rows = 2 ** 20
        cols = 2 ** 20

        def get_inputs():
            return [torch.rand(rows, cols)]

        def get_init_inputs():
            return []
    """))
    started = time.monotonic()
    overrides = reduced_sizes(read_problem(path), max_elements=1 << 18)
    assert set(overrides) == {"rows", "cols"} and 2 * overrides["rows"] * overrides["cols"] <= 1 << 18
    assert time.monotonic() - started < 20


def test_reduced_sizes_second_pass_shrinks_small_sizes_only_when_needed(tmp_path: Path) -> None:
    # A 3-D transposed convolution whose batch (8) and depth (12) are below the first pass's floor of 16: height and
    # width alone cannot bring its outputs under the budget, so a second pass shrinks every input-only size from 8,
    # to no less than 4. The channels and the kernel (the constructor's) never change.
    from kernelwright.problem.files import read_problem
    from kernelwright.problem.sizes import reduced_sizes

    path = tmp_path / "up3d.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.up = nn.ConvTranspose3d(c, c, 3, stride=2, padding=1, output_padding=1)

            def forward(self, x):
                return self.up(x)

        batch_size = 8
        channels = 8
        depth = 12
        height = 32
        width = 32

        def get_inputs():
            return [torch.randn(batch_size, channels, depth, height, width)]

        def get_init_inputs():
            return [channels]
    """))
    problem = read_problem(path)
    overrides = reduced_sizes(problem, max_elements=1 << 16)
    assert set(overrides) == {"batch_size", "depth", "height", "width"}
    assert min(overrides.values()) >= 4 and overrides["depth"] < 12 and overrides["batch_size"] < 8
    # Where the first pass reaches the budget, nothing below 16 moves.
    assert set(reduced_sizes(problem, max_elements=1 << 21, max_conv_steps=1 << 30)) == {"height", "width"}


def test_the_cost_model_orders_each_groups_alternatives(problem: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """With a ranker (a trained cost model), a group's alternatives are timed in its order and only what it keeps;
    --no-model (use_model=False) times them in the templates' order."""
    import kernelwright.costmodel.ranker as ranker_module

    class Reversed:
        families = {"any"}

        def order(self, candidates, family):
            return list(reversed(candidates))[:2]  # the model's top two, last configuration first

    asked = []
    monkeypatch.setenv("KERNELWRIGHT_PTX_REWRITES", "0")  # the rewrite stage's timings are tested on their own
    monkeypatch.setattr(ranker_module, "search_ranker", lambda arch, enabled=True: asked.append(enabled) or (
        Reversed() if enabled else None))
    clock = _fake_clock(monkeypatch)
    stub = StubEvaluator(times={}, clock=clock, step_s=1.0)
    optimize(problem, out_dir=tmp_path / "run", device="cpu", budget_s=3600.0, evaluator=stub,
             verify_allowance_s=100.0)
    plain = StubEvaluator(times={}, clock=clock, step_s=1.0)
    optimize(problem, out_dir=tmp_path / "plain", device="cpu", budget_s=3600.0, evaluator=plain,
             verify_allowance_s=100.0, use_model=False)
    assert asked == [True, False]
    assert len(plain.seen) >= 4, "the problem's space must have alternatives to order"
    assert stub.seen[0] == 0 and len(stub.seen) == 3  # the default, then the ranker's two
    alternatives = plain.seen[1:]
    assert stub.seen[1] > stub.seen[2]  # in the ranker's (reversed) order
    assert alternatives == sorted(alternatives)  # the templates' order
