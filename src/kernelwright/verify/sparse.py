"""The sparse-change trials' inputs (integrity #34): an earlier random trial's inputs with a few elements changed.

A candidate can cache its answer keyed by a few probed elements of each input (the first, the middle, the last), or
by the data pointer and those probes, and serve the cached answer through a copy kernel of its own. Every other
trial changes nearly every element, so such a cache never hits wrongly there. Here a handful of elements of each
input change, at positions spread over the tensor and drawn from the trial's seed, and nothing else does: the
reference computes the answer for them, and a cached one is stale.

The changes keep the problem's input domain as far as the values show it, in levels the reference tries in turn
until the source trial's answer would be wrong for them (a change the answer does not see catches no cache):

0. swaps of two elements of one row (the last dimension): every row keeps its values, so a row of probabilities
   still sums to one, a row of indices holds the same indices, a permutation stays one;
1. swaps along the first dimension instead (a column): each row's values change, where a reduction over the rows'
   elements (a sum, a max, a norm) does not see a swap within them;
2. an element overwritten by another of its row: the row's values change, but stay values the input holds;
3. and 4. swaps with the row's largest or smallest element, where only an extreme is read (an argmax, an argmin).

A float change moves finite non-zero values only, so a triangular or masked input keeps its zeros and its
infinities, and each by at least half its row's spread where the row allows. A symmetric matrix gets the mirrored
change too, off its diagonal, and stays symmetric (no level 1 there: a swap between matrices of a batch would break
it). Integer and bool inputs (indices, lengths, masks) change only where no float input can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

CHANGES_PER_INPUT = 4  # changes of each input, one per quarter of its elements: up to 8 elements (16 mirrored)
DRAWS_PER_POSITION = 4  # tries for a usable position in each quarter (a triangular input is half zeros)
PARTNER_DRAWS = 64  # the row elements a partner is chosen among (a row can be millions of elements long)
MIN_STEP = 0.5  # a value moves by at least this fraction of its row's spread, where one in the draw does
SEED_SALT = 0x5BA25E  # the positions' generator is not the one get_inputs drew the values from


@dataclass(frozen=True)
class Level:
    """One way of changing a few elements (the module's docstring lists them in order)."""

    note: str  # how the note names the change ({dim}: the dimension it moves along)
    along_first: bool = False  # along the first dimension of more than one element, not the last
    swap: bool = True  # exchange the two elements (else the partner's value overwrites the element's)
    partner: Literal["random", "largest", "smallest"] = "random"  # drawn from the row, or the row's extreme


LEVELS = (Level("swapped within their rows"), Level("swapped along dimension {dim}", along_first=True),
          Level("overwritten by others of their rows", swap=False),
          Level("swapped with their row's largest", partner="largest"),
          Level("swapped with their row's smallest", partner="smallest"))


def sparse_change(values: list[Any], seed: int, level: int = 0) -> tuple[list[Any], str]:
    """``values`` with a few elements of each float tensor changed at ``level`` (of each integer or bool tensor
    where no float one can change), and a note that says how many. The changed tensors are new ones; ``values`` is
    left as it was. The note is empty where nothing could change at this level."""
    gen = torch.Generator().manual_seed((seed ^ SEED_SALT) + 7919 * level)
    chosen = [i for i, v in enumerate(values) if _changeable(v, level) and v.is_floating_point()]
    if not chosen:
        chosen = [i for i, v in enumerate(values) if _changeable(v, level)]
    out, notes = list(values), []
    for i in chosen:
        changed, count = change_few(values[i], gen, level)
        if count:
            out[i] = changed
            how = LEVELS[level].note.format(dim=_line_dim(values[i], level))
            notes.append(f"input {i}: {count} of {values[i].numel()} elements {how}")
    return out, "; ".join(notes)


def _changeable(v: Any, level: int) -> bool:
    return (isinstance(v, torch.Tensor) and v.numel() >= 2 and not v.is_complex()
            and _line_dim(v, level) is not None)


def _line_dim(v: torch.Tensor, level: int) -> int | None:
    """The dimension a change moves along: the last of more than one element (a column vector is one row), or at
    a level along the first, the first other one; None where there is none (a vector there)."""
    sized = [d for d in range(v.dim()) if v.shape[d] > 1]
    if not sized:
        return None
    if not LEVELS[level].along_first:
        return sized[-1]
    return sized[0] if len(sized) > 1 and not _symmetric(v) else None


def _symmetric(v: torch.Tensor) -> bool:
    return v.dim() >= 2 and v.shape[-1] == v.shape[-2] > 1 and bool(torch.equal(v, v.transpose(-1, -2)))


def change_few(v: torch.Tensor, gen: torch.Generator, level: int = 0,
               changes: int = CHANGES_PER_INPUT) -> tuple[torch.Tensor, int]:
    """A copy of ``v`` (same device, dtype and layout) with up to ``changes`` changes at ``level``, one in each of
    ``changes`` equal stretches of its elements (in the order of the rows changed); the number of elements
    changed."""
    out = v.detach().clone()
    dim = _line_dim(out, level)
    if dim is None:
        return out, 0
    rows = _Rows(out, dim, LEVELS[level])
    changed: set[int] = set()
    for lo, hi in _stretches(out.numel(), changes):
        for _ in range(DRAWS_PER_POSITION):
            position = lo + int(torch.randint(hi - lo, (1,), generator=gen))
            touched = rows.change_at(position, changed, gen)
            if touched:
                changed.update(touched)
                break
    return out, len(changed)


def _stretches(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive ranges covering ``range(n)`` (fewer where ``n`` is smaller), so that the positions
    drawn in them are spread over the whole tensor."""
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


class _Rows:
    """A tensor seen as rows along ``dim`` (a view with ``dim`` moved last: writes reach the tensor), with the
    ``level``'s changes, which keep each value one the row held."""

    def __init__(self, tensor: torch.Tensor, dim: int, level: Level) -> None:
        core = tensor.movedim(dim, -1)
        self.core, self.level = core, level
        self.width = core.shape[-1]
        self.floating = core.is_floating_point()
        self.boolean = core.dtype == torch.bool
        # A symmetric matrix (or batch of them) stays symmetric: each change is mirrored across the diagonal.
        self.side = self.width if dim == tensor.dim() - 1 and _symmetric(core) else 0

    def _row(self, r: int) -> torch.Tensor:
        return self.core[_unravel(r, self.core.shape[:-1])] if self.core.dim() > 1 else self.core

    def _mirror(self, r: int, c: int) -> int:
        """The flat position (in rows) of element (c, i) of the matrix whose row i is row ``r``."""
        start = r - r % self.side
        return (start + c) * self.width + r % self.side

    def _usable(self, value: Any) -> bool:
        # Zeros and infinities stay where they are: they are structure (a triangle, a mask), not data.
        return not self.floating or (value != 0 and value == value and abs(value) != float("inf"))

    def change_at(self, position: int, changed: set[int], gen: torch.Generator) -> list[int]:
        """Change the element at ``position`` (flat, in rows) with a partner in its row; the flat positions changed
        (none where the element, or every partner drawn, would break the input's structure or touch a changed
        element)."""
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

        if self.level.partner == "random":
            j = _partner(row, own, blocked, gen, numeric=not self.boolean, usable=self._usable)
        else:
            j = _extreme(row, largest=self.level.partner == "largest", floating=self.floating)
        if j is None or blocked(j) or row[j].item() == own or not self._usable(row[j].item()):
            return []
        lines = [row]
        if mirrored:
            matrix = self.core[_unravel(r // self.side, self.core.shape[:-2])] if self.core.dim() > 2 else self.core
            lines.append(matrix[:, r % self.side])
        swap = self.level.swap
        for line in lines:
            _move(line, c, j, swap=swap)
        touched = [r * self.width + c] + ([r * self.width + j] if swap else [])
        if mirrored:
            touched += [self._mirror(r, c)] + ([self._mirror(r, j)] if swap else [])
        return touched


def _partner(row: torch.Tensor, own: Any, blocked: Callable[[int], bool], gen: torch.Generator, *,
             numeric: bool, usable: Callable[[Any], bool]) -> int | None:
    """A column of ``row`` to take a value from: drawn among ``PARTNER_DRAWS`` random ones, holding a value other
    than ``own`` (a usable one), preferably at least ``MIN_STEP`` of the draw's spread away from it; None where none
    is."""
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


def _extreme(row: torch.Tensor, *, largest: bool, floating: bool) -> int:
    """The column of ``row``'s largest (or smallest) element, zeros and non-finite values left out of a float row."""
    values = row.to(torch.float64)
    if floating:
        keep = torch.isfinite(values) & (values != 0)
        values = values.masked_fill(~keep, -float("inf") if largest else float("inf"))
    return int(values.argmax() if largest else values.argmin())


def _move(line: torch.Tensor, a: int, b: int, *, swap: bool) -> None:
    """Exchange elements ``a`` and ``b`` of a 1-D view in place (the right-hand side is gathered before it is
    written), or copy ``b``'s value into ``a``."""
    if not swap:
        line[a] = line[b]
        return
    index = torch.tensor([a, b], device=line.device)
    line[index] = line[index.flip(0)]


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))
