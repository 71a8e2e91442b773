"""The sparse-change trials (integrity #34), in-process: where the plan puts them, how their inputs are made (a few
elements of an earlier trial's, changed within the input's own values) and how the candidate's job places them."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from kernelwright.jobs.records import TrialSpec
from kernelwright.verify import reference, sparse, tensors, trials
from kernelwright.verify.child.candidate import _CandidateJob
from kernelwright.verify.findings import SPECIAL_TRIAL_CODES
from kernelwright.verify.inputs import make_inputs


def _changed(a: torch.Tensor, b: torch.Tensor) -> list[tuple[int, ...]]:
    return [tuple(i) for i in (a != b).nonzero().tolist()]


# -- the plan ---------------------------------------------------------------------------------------------------


def test_plan_puts_both_sparse_trials_after_the_random_ones_each_on_a_trial_of_its_own() -> None:
    plan = trials.plan_trials(100, 6)
    kinds = [t.kind for t in plan]
    assert kinds == ["random"] * 6 + ["rewrite", "repoison", "sparse_in_place", "sparse_copy", "scaled",
                                      "heavy_tailed", "shape"]
    assert [t.index for t in plan] == list(range(len(plan)))
    by_kind = {t.kind: t for t in plan}
    in_place, copy = by_kind[trials.SPARSE_IN_PLACE], by_kind[trials.SPARSE_COPY]
    # Sources that no earlier special trial rewrote (trial 0's buffers hold the rewrite's values by then).
    assert {in_place.source, copy.source}.isdisjoint({by_kind["rewrite"].source, by_kind["repoison"].source})
    assert in_place.source != copy.source and plan[in_place.source].kind == plan[copy.source].kind == trials.RANDOM
    assert in_place.seed == 100 + in_place.index and copy.seed == 100 + copy.index  # a seed of their own
    assert in_place.needs_own_reference and copy.needs_own_reference  # new inputs: answered afresh
    assert in_place.in_place and not copy.in_place and by_kind["rewrite"].in_place
    assert not any(t.in_place for t in plan if t.kind not in (trials.REWRITE, trials.SPARSE_IN_PLACE))
    assert trials.plan_trials(100, 6) == plan  # --seed replays the same plan


def test_sparse_trials_stay_when_the_optional_trials_are_off() -> None:
    kinds = [t.kind for t in trials.plan_trials(1, distribution=False, second_shape=False)]
    assert kinds == ["random"] * 5 + ["rewrite", "repoison", "sparse_in_place", "sparse_copy"]


def test_a_sparse_trial_spec_round_trips_and_old_specs_still_read() -> None:
    spec = TrialSpec(index=7, kind=trials.SPARSE_IN_PLACE, seed=9, source=2)
    assert TrialSpec.from_json(spec.to_json()) == spec
    old = TrialSpec.from_json({"index": 5, "kind": "rewrite", "seed": 6, "source": 0})  # no field was added
    assert old.in_place and old.poison == trials.POISON_NAN


def test_a_failure_on_a_sparse_trial_names_output_caching_and_stale_answers() -> None:
    for kind in trials.SPARSE:
        code, template = SPECIAL_TRIAL_CODES[kind]
        message = template.format(source=2, note="input 0: 8 of 4800 elements swapped within their rows")
        assert code == "output-caching"
        assert "stale" in message and "only a few elements" in message and "probed" in message
    assert "pointer" in SPECIAL_TRIAL_CODES[trials.SPARSE_IN_PLACE][1]


# -- the inputs -------------------------------------------------------------------------------------------------


def test_a_few_elements_change_spread_over_the_tensor_within_their_rows() -> None:
    x = torch.randn(64, 300)
    (y,), note = sparse.sparse_change([x], seed=11)
    where = _changed(x, y)
    assert len(where) == 2 * sparse.CHANGES_PER_INPUT and note == "input 0: 8 of 19200 elements swapped within their rows"
    rows = sorted({r for r, _ in where})
    assert len(rows) == sparse.CHANGES_PER_INPUT and rows[0] < 16 and rows[-1] >= 48  # one swap per stretch
    assert torch.equal(x.sort(dim=1).values, y.sort(dim=1).values)  # every row keeps its values
    assert all(abs(float(x[i]) - float(y[i])) > 0.25 for i in where)  # a meaningful move (half the rows' spread)
    assert y.dtype == x.dtype and y.device == x.device and y.data_ptr() != x.data_ptr()


def test_the_change_is_reproducible_from_the_seed_and_leaves_the_source_alone() -> None:
    x = torch.randn(16, 300)
    kept = x.clone()
    first, _ = sparse.sparse_change([x, 3], seed=5)
    again, _ = sparse.sparse_change([x, 3], seed=5)
    other, _ = sparse.sparse_change([x, 3], seed=6)
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    assert torch.equal(x, kept) and first[1] == 3


def test_structure_is_kept_symmetric_triangular_masked_probabilities() -> None:
    a = torch.randn(3, 12, 12)
    sym = a + a.transpose(-1, -2)
    (s,), _ = sparse.sparse_change([sym], seed=1)
    assert not torch.equal(s, sym) and torch.equal(s, s.transpose(-1, -2))
    assert torch.equal(s.diagonal(dim1=-2, dim2=-1), sym.diagonal(dim1=-2, dim2=-1))  # the diagonal stays
    upper = torch.triu(torch.randn(40, 40))
    (u,), _ = sparse.sparse_change([upper], seed=2)
    assert not torch.equal(u, upper) and torch.equal(u, torch.triu(u))  # zeros stay zeros
    masked = torch.randn(8, 50).masked_fill(torch.rand(8, 50) < 0.5, float("-inf"))
    (m,), _ = sparse.sparse_change([masked], seed=3)
    assert not torch.equal(m, masked) and torch.equal(torch.isinf(m), torch.isinf(masked))
    probs = torch.softmax(torch.randn(10, 30), dim=-1)
    (p,), _ = sparse.sparse_change([probs], seed=4)
    assert not torch.equal(p, probs) and torch.allclose(p.sum(-1), torch.ones(10))


def test_integer_inputs_change_only_where_no_float_input_can() -> None:
    x, index = torch.randn(6, 20), torch.randint(0, 10, (6, 20))
    (y, kept), note = sparse.sparse_change([x, index], seed=8)
    assert kept is index and not torch.equal(y, x) and note.startswith("input 0:")
    (moved,), note = sparse.sparse_change([index], seed=8)
    assert not torch.equal(moved, index) and torch.equal(moved.sort(dim=1).values, index.sort(dim=1).values)
    mask = torch.rand(4, 9) < 0.5
    (flipped,), _ = sparse.sparse_change([mask], seed=8)
    assert not torch.equal(flipped, mask) and torch.equal(flipped.sum(1), mask.sum(1))


def test_layouts_and_edge_shapes() -> None:
    strided = torch.randn(30, 20).t()
    (y,), _ = sparse.sparse_change([strided], seed=3)
    assert y.stride() == strided.stride() and 0 < len(_changed(strided, y)) <= 8
    column = torch.randn(10, 1)  # a column vector is one row
    (c,), note = sparse.sparse_change([column], seed=3)
    assert len(_changed(column, c)) == 8 and torch.equal(c.sort(dim=0).values, column.sort(dim=0).values)
    values, note = sparse.sparse_change([torch.ones(5, 5), torch.zeros(3), torch.tensor(2.0), 7], seed=3)
    assert note == "" and values[3] == 7  # nothing can change within its own values: the trial is skipped


# -- the jobs ---------------------------------------------------------------------------------------------------


def _problem(body: str) -> types.ModuleType:
    module = types.ModuleType("p")
    exec(body, module.__dict__)
    return module


class _RowSum(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return x.sum(dim=-1) * n


class _ArgMax(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return x.argmax(dim=-1)


class _Constant(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return torch.zeros(3) + n


def _sparse_answer(model: torch.nn.Module, trial: TrialSpec, seed: int):
    problem = _problem("import torch\ndef get_inputs():\n    return [torch.randn(16, 300), 4]\n")
    answers = reference._Answers(model, torch.device("cpu"))
    source = make_inputs(problem, seed, "cpu")
    earlier = reference._run(model, source, torch.device("cpu"))
    return source, reference._sparse_answer(answers, problem, trial, seed, torch.device("cpu"), earlier)


def test_the_reference_changes_the_source_trials_inputs_made_again_from_its_seed() -> None:
    plan = trials.plan_trials(40)
    for trial in (t for t in plan if t.kind in trials.SPARSE):
        source, (native, ref64, inputs, note, skipped) = _sparse_answer(_Softmax(), trial, plan[trial.source].seed)
        assert skipped is None and note == "input 0: 8 of 4800 elements swapped within their rows"
        assert inputs[1] == 4 and 0 < len(_changed(source[0], inputs[0])) <= 8
        assert torch.equal(native[0], torch.softmax(inputs[0], dim=-1)) and ref64[0].dtype == torch.float64


class _Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def test_a_change_the_answer_does_not_see_gives_way_to_the_next_level_or_skips_the_trial() -> None:
    trial = trials.plan_trials(40)[8]
    # A sum over the rows does not see a swap within them: the swap moves along the columns instead.
    source, (native, _, inputs, note, skipped) = _sparse_answer(_RowSum(), trial, 42)
    assert skipped is None and "swapped along dimension 0" in note
    assert not torch.equal(native[0], _RowSum()(source[0], 4))
    # An argmax reads only each row's largest element: it is what moves.
    _, (native, _, _, note, skipped) = _sparse_answer(_ArgMax(), trial, 42)
    assert skipped is None and "swapped with their row's largest" in note
    _, (native, _, _, note, skipped) = _sparse_answer(_Constant(), trial, 42)
    assert native is None and skipped == "the answer does not change beyond the tolerance when a few elements of the inputs do"


def test_levels_move_along_columns_copy_values_a_row_holds_then_move_its_extremes() -> None:
    x = torch.randn(16, 300)
    (across,), note = sparse.sparse_change([x], seed=3, level=1)
    assert note.endswith("swapped along dimension 0") and torch.equal(x.sort(0).values, across.sort(0).values)
    assert not torch.equal(x.sum(1), across.sum(1))
    (copied,), note = sparse.sparse_change([x], seed=3, level=2)
    where = _changed(x, copied)
    assert note == "input 0: 4 of 4800 elements overwritten by others of their rows" and len(where) == 4
    assert all(bool((x[r] == copied[r, c]).any()) for r, c in where)  # a value its row holds
    for level, extreme in ((3, torch.amax), (4, torch.amin)):
        (moved,), note = sparse.sparse_change([x], seed=3, level=level)
        rows = sorted({r for r, _ in _changed(x, moved)})
        assert len(rows) == 4 and torch.equal(x.sort(1).values, moved.sort(1).values)
        assert all(bool((moved[r] != x[r])[x[r] == extreme(x[r])].all()) for r in rows)  # the extreme moved
    sym = torch.randn(9, 9)
    sym = sym + sym.t()
    assert sparse.sparse_change([sym], seed=3, level=1)[1] == ""  # no swaps between a batch's matrices
    (s,), _ = sparse.sparse_change([sym], seed=3, level=2)
    assert not torch.equal(s, sym) and torch.equal(s, s.t())


def _job(tmp_path: Path) -> types.SimpleNamespace:
    return types.SimpleNamespace(torch=torch, tensors=tensors, trials=trials, shared=tmp_path, buffers={},
                                 device=torch.device("cpu"))


def test_the_candidate_writes_in_place_through_data_or_into_new_buffers(tmp_path: Path) -> None:
    job = _job(tmp_path)
    base = torch.randn(16, 300)
    changed, _ = sparse.sparse_change([base], seed=1)
    tensors.save([base], tmp_path / "inputs-2.pt")
    tensors.save(changed, tmp_path / "inputs-7.pt")
    tensors.save(changed, tmp_path / "inputs-8.pt")
    (source,) = _CandidateJob._inputs(job, TrialSpec(index=2, kind=trials.RANDOM, seed=2))
    address, version = source.data_ptr(), source._version
    (in_place,) = _CandidateJob._inputs(job, TrialSpec(index=7, kind=trials.SPARSE_IN_PLACE, seed=7, source=2))
    assert in_place is source and in_place.data_ptr() == address and in_place._version == version
    assert torch.equal(in_place, changed[0])
    (copy,) = _CandidateJob._inputs(job, TrialSpec(index=8, kind=trials.SPARSE_COPY, seed=8, source=3))
    assert copy.data_ptr() != address and torch.equal(copy, changed[0])
    assert set(job.buffers) == {2, 7, 8}  # every trial's buffers stay alive: new addresses for the next


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_keep_their_values(dtype: torch.dtype) -> None:
    x = torch.randn(8, 33).to(dtype)
    (y,), _ = sparse.sparse_change([x], seed=9)
    assert y.dtype == dtype and len(_changed(x, y)) == 8
    assert torch.equal(x.sort(dim=1).values, y.sort(dim=1).values)
