"""The sparse-change trials' inputs (integrity #34): an earlier random trial's inputs with a few elements changed.

A candidate can cache its answer keyed by a few probed elements of each input (the first, the middle, the last), or
by the data pointer and those probes, and serve the cached answer through a copy kernel of its own. Every other
trial changes nearly every element, so such a cache never hits wrongly there. Here a handful of elements of each
input change, at positions spread over the tensor and drawn from the trial's seed, and nothing else does: the
reference computes the answer for them, and a cached one is stale.

The changes keep the problem's input domain as far as the values show it. Each is a swap of two elements of one
row (the last dimension), so every row keeps the values it had: a row of probabilities still sums to one, a row of
indices holds the same indices, a value set (positive, in range, a permutation) is kept. A float swap moves two
finite non-zero values, so a triangular or masked input keeps its zeros and its infinities, and each moves by at
least half its row's spread where the row allows. A symmetric matrix gets the mirrored swap too, off its diagonal,
and stays symmetric. Integer and bool inputs (indices, lengths, masks) change only where no float input can.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

SWAPS_PER_INPUT = 4  # 8 elements of an input change: a cache keyed by m probes of n elements sees it with odds ~8m/n
DRAWS_PER_POSITION = 4  # tries for a usable position in each stretch of the tensor (a triangular input is half zeros)
PARTNER_DRAWS = 64  # the row elements a swap partner is chosen among (a row can be millions of elements long)
MIN_STEP = 0.5  # a swapped value moves by at least this fraction of its row's spread, where one in the draw does
SEED_SALT = 0x5BA25E  # the positions' generator is not the one get_inputs drew the values from


def sparse_change(values: list[Any], seed: int) -> tuple[list[Any], str]:
    """``values`` with a few elements of each float tensor swapped (of each integer or bool tensor where no float one
    can change), and a note that says how many. The changed tensors are new ones; ``values`` is left as it was. The
    note is empty where nothing could change."""
    gen = torch.Generator().manual_seed(seed ^ SEED_SALT)
    chosen = [i for i, v in enumerate(values) if _changeable(v) and v.is_floating_point()]
    if not chosen:
        chosen = [i for i, v in enumerate(values) if _changeable(v)]
    out, notes = list(values), []
    for i in chosen:
        changed, count = swap_few(values[i], gen)
        if count:
            out[i] = changed
            notes.append(f"input {i}: {count} of {values[i].numel()} elements swapped within their rows")
    return out, "; ".join(notes)


def _changeable(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.numel() >= 2 and not v.is_complex()


def swap_few(v: torch.Tensor, gen: torch.Generator, swaps: int = SWAPS_PER_INPUT) -> tuple[torch.Tensor, int]:
    """A copy of ``v`` (same device, dtype and layout) with up to ``swaps`` pairs of elements swapped, one pair in
    each of ``swaps`` equal stretches of its elements; the number of elements changed."""
    out = v.detach().clone()
    rows = _Rows(out)
    changed: set[int] = set()
    for lo, hi in _stretches(out.numel(), swaps):
        for _ in range(DRAWS_PER_POSITION):
            position = lo + int(torch.randint(hi - lo, (1,), generator=gen))
            swapped = rows.swap_at(position, changed, gen)
            if swapped:
                changed.update(swapped)
                break
    return out, len(changed)


def _stretches(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive ranges covering ``range(n)`` (fewer where ``n`` is smaller), so that the positions
    drawn in them are spread over the whole tensor."""
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


class _Rows:
    """A tensor seen as rows along its last dimension of more than one element (trailing size-1 dimensions are
    skipped: a column vector is one row), with the swaps that keep each row's values."""

    def __init__(self, tensor: torch.Tensor) -> None:
        core = tensor
        while core.dim() > 1 and core.shape[-1] == 1:
            core = core.select(-1, 0)  # a view: writes reach ``tensor``
        self.core = core
        self.width = core.shape[-1]
        self.floating = core.is_floating_point()
        self.boolean = core.dtype == torch.bool
        # A symmetric matrix (or batch of them) stays symmetric: each swap is mirrored across the diagonal.
        self.side = core.shape[-1] if (core.dim() >= 2 and core.shape[-1] == core.shape[-2]
                                       and torch.equal(core, core.transpose(-1, -2))) else 0

    def _row(self, r: int) -> torch.Tensor:
        return self.core[_unravel(r, self.core.shape[:-1])] if self.core.dim() > 1 else self.core

    def _mirror(self, r: int, c: int) -> int:
        """The flat position of element (c, i) of the matrix whose row i is row ``r``."""
        start = r - r % self.side
        return (start + c) * self.width + r % self.side

    def _usable(self, value: Any) -> bool:
        # Zeros and infinities stay where they are: they are structure (a triangle, a mask), not data.
        return not self.floating or (value != 0 and value == value and abs(value) != float("inf"))

    def swap_at(self, position: int, changed: set[int], gen: torch.Generator) -> list[int]:
        """Swap the element at flat ``position`` with a partner in its row; the flat positions changed (none where
        the element, or every partner drawn, would break the input's structure or touch a changed element)."""
        r, c = divmod(position, self.width)
        row = self._row(r)
        own = row[c].item()
        mirrored = bool(self.side)
        if position in changed or not self._usable(own):
            return []
        if mirrored and (c == r % self.side or self._mirror(r, c) in changed):
            return []  # the diagonal stays (a positive-definite matrix keeps it), and so do changed elements

        def blocked(j: int) -> bool:
            if j == c or r * self.width + j in changed:
                return True
            return mirrored and (j == r % self.side or self._mirror(r, j) in changed)

        j = _partner(row, own, blocked, gen, numeric=not self.boolean, usable=self._usable)
        if j is None:
            return []
        _swap(row, c, j)
        touched = [r * self.width + c, r * self.width + j]
        if mirrored:
            matrix = self.core[_unravel(r // self.side, self.core.shape[:-2])] if self.core.dim() > 2 else self.core
            _swap(matrix[:, r % self.side], c, j)
            touched += [self._mirror(r, c), self._mirror(r, j)]
        return touched


def _partner(row: torch.Tensor, own: Any, blocked: Callable[[int], bool], gen: torch.Generator, *,
             numeric: bool, usable: Callable[[Any], bool]) -> int | None:
    """A column of ``row`` to swap with: drawn among ``PARTNER_DRAWS`` random ones, holding a value other than
    ``own`` (a usable one), preferably at least ``MIN_STEP`` of the draw's spread away from it; None where none is."""
    cols = torch.randint(row.numel(), (PARTNER_DRAWS,), generator=gen)
    values = row[cols.to(row.device)].cpu().tolist()
    allowed = [k for k, (j, value) in enumerate(zip(cols.tolist(), values))
               if value != own and usable(value) and not blocked(j)]
    if not allowed:
        return None
    if numeric:
        finite = torch.tensor([x for x in values if usable(x)] or [own], dtype=torch.float64)
        floor = MIN_STEP * float(finite.std(unbiased=False))
        far = [k for k in allowed if abs(values[k] - own) >= floor]
        allowed = far or allowed
    return int(cols[allowed[0]])


def _swap(line: torch.Tensor, a: int, b: int) -> None:
    """Exchange two elements of a 1-D view in place (the right-hand side is gathered before it is written)."""
    index = torch.tensor([a, b], device=line.device)
    line[index] = line[index.flip(0)]


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))
