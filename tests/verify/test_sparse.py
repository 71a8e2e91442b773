"""The sparse-change trials' inputs (integrity #34), in-process: a few elements of an earlier trial's, changed
within the input's own values."""

from __future__ import annotations

import pytest
import torch

from kernelwright.verify import sparse


def _changed(a: torch.Tensor, b: torch.Tensor) -> list[tuple[int, ...]]:
    return [tuple(i) for i in (a != b).nonzero().tolist()]


# -- the inputs -------------------------------------------------------------------------------------------------


def test_a_few_elements_change_spread_over_the_tensor_within_their_rows() -> None:
    x = torch.randn(64, 300)
    (y,), note = sparse.sparse_change([x], seed=11)
    where = _changed(x, y)
    assert len(where) == 2 * sparse.SWAPS_PER_INPUT and note == "input 0: 8 of 19200 elements swapped within their rows"
    rows = sorted({r for r, _ in where})
    assert len(rows) == sparse.SWAPS_PER_INPUT and rows[0] < 16 and rows[-1] >= 48  # one swap per stretch
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


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_keep_their_values(dtype: torch.dtype) -> None:
    x = torch.randn(8, 33).to(dtype)
    (y,), _ = sparse.sparse_change([x], seed=9)
    assert y.dtype == dtype and len(_changed(x, y)) == 8
    assert torch.equal(x.sort(dim=1).values, y.sort(dim=1).values)
