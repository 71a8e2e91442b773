"""Constant subgraphs evaluated symbolically (``full``/``arange``/``sub``/comparisons/logical ops/``where``/``triu``/
``tril``): values as functions of the index along each dimension, whatever the sizes. Attention reads a mask from
them (a causal mask is recognised as such); the GEMM epilogue computes index values (``triu`` of a product's
``arange`` comparisons) from the tile's coordinates instead of reading tensors PyTorch made."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.generate.families.base import broadcastable, graph_node
from kernelwright.generate.graph import Node, ProblemGraph, Ref
from kernelwright.generate.operators import CASTS, COPIES, RESHAPES


@dataclass(frozen=True)
class _Sym:
    """A constant tensor described by its shape and its value at an index. ``at(idx)`` gets ``idx(k)``, the
    index along the k-th dim *from the right* (0: the key column j, 1: the query row i).

    Two kinds, so that what a mask can do stays provable: *affine* values (``affine`` is
    ``({dim_from_right: coefficient}, constant)``: arange and sums of aranges) and *step* values (``affine`` is
    None: constants, and anything computed from comparisons of affine values — piecewise constant, changing only
    where one of ``forms``, the affine forms compared, crosses zero). Arithmetic that would leave these two kinds
    (an affine value times another, a step value plus an affine one) is not evaluated."""

    shape: tuple[int, ...]
    at: Callable[[Callable[[int], int]], Any]
    affine: tuple[dict[int, int], float] | None = None
    forms: tuple[tuple[tuple[tuple[int, int], ...], float], ...] = ()


def _const(value: Any, shape: Sequence[int] = ()) -> _Sym:
    return _Sym(tuple(shape), lambda idx: value)


def _affine(coef: dict[int, int], const: float, shape: Sequence[int]) -> _Sym:
    coef = {d: c for d, c in coef.items() if c != 0}

    def at(idx: Callable[[int], int]) -> float:
        return sum(c * idx(d) for d, c in coef.items()) + const

    return _Sym(tuple(shape), at, (coef, const))


def _form(affine: tuple[dict[int, int], float]) -> tuple[tuple[tuple[int, int], ...], float]:
    return tuple(sorted(affine[0].items())), affine[1]


def _as_affine(sym: _Sym) -> tuple[dict[int, int], float] | None:
    """The affine form of a value: its own, or ({}, c) for a constant number."""
    if sym.affine is not None:
        return sym.affine
    if not sym.forms:
        value = sym.at(lambda k: 0)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return {}, value
    return None


def _step(shape: Sequence[int], fn: Callable[..., Any], *parts: _Sym) -> _Sym | None:
    """A pointwise function of step values (None if a part is affine and not constant)."""
    if any(p.affine is not None and p.affine[0] for p in parts):
        return None
    forms = tuple(f for p in parts for f in p.forms)
    return _Sym(tuple(shape), lambda idx: fn(*(p.at(idx) for p in parts)), None, forms)


def _remap(sym: _Sym, shape: Sequence[int], old_of_new: Callable[[int], int | None]) -> _Sym | None:
    """The same values under a new shape whose from-right dim n is the old from-right dim ``old_of_new(n)``
    (None: a new dim of size 1)."""
    new_of_old: dict[int, int] = {}
    for n in range(len(shape)):
        o = old_of_new(n)
        if o is not None:
            new_of_old[o] = n
    if any(d not in new_of_old for coefs, _ in sym.forms for d, _ in coefs):
        return None

    def at(idx: Callable[[int], int]) -> Any:
        return sym.at(lambda o: idx(new_of_old[o]) if o in new_of_old else 0)

    forms = tuple((tuple((new_of_old[d], c) for d, c in coefs), const) for coefs, const in sym.forms)
    affine = None
    if sym.affine is not None:
        affine = ({new_of_old[d]: c for d, c in sym.affine[0].items()}, sym.affine[1])
    return _Sym(tuple(shape), at, affine, forms)


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(*(tuple(s) for s in shapes)))
    except RuntimeError:
        return None


_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}  # fmt: skip
_LOGIC: dict[str, Callable[[Any, Any], bool]] = {
    "logical_and": lambda a, b: bool(a) and bool(b), "logical_or": lambda a, b: bool(a) or bool(b),
    "logical_xor": lambda a, b: bool(a) != bool(b), "bitwise_and": lambda a, b: bool(a) and bool(b),
    "bitwise_or": lambda a, b: bool(a) or bool(b), "bitwise_xor": lambda a, b: bool(a) != bool(b),
}  # fmt: skip


def _convert(value: Any, dtype: torch.dtype | None) -> Any:
    if dtype is None:
        return value
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return int(value)


class MaskEvaluator:
    """Symbolic evaluation of the constant subgraph behind a mask; ``nodes`` collects the nodes it read."""

    def __init__(self, graph: ProblemGraph) -> None:
        self.graph = graph
        self.nodes: set[str] = set()
        self._memo: dict[str, _Sym] = {}

    def value(self, arg: Any) -> _Sym | None:
        if isinstance(arg, (bool, int, float)):
            return _const(arg)
        if not isinstance(arg, Ref):
            return None
        if arg.name in self._memo:
            return self._memo[arg.name]
        node = graph_node(self.graph, arg.name)
        if node is None or node.info is None:
            return None  # a placeholder, a parameter or a multi-output node: not a constant
        sym = self._node(node)
        if sym is not None:
            self.nodes.add(node.name)
            self._memo[arg.name] = sym
        return sym

    def _node(self, node: Node) -> _Sym | None:  # noqa: C901 - one small case per operator
        shape = tuple(node.info.shape)
        args = node.args
        op = node.op
        if op in ("full", "full_like"):
            return _const(args[1], shape) if isinstance(args[1], (bool, int, float)) else None
        if op == "scalar_tensor":
            return _const(args[0], shape) if isinstance(args[0], (bool, int, float)) else None
        if op == "arange":
            if not all(isinstance(a, int) and not isinstance(a, bool) for a in args) or len(shape) != 1:
                return None
            start, step = (0, 1) if len(args) == 1 else (args[0], args[2] if len(args) > 2 else 1)
            if step != 1 or (len(args) > 1 and _run_time(node, 0)):
                return None  # a start that is a size (`arange(m, 2 * m)`) would be the example's number
            if shape[0] == 1:
                return _const(start, shape)  # a broadcast size-1 dim always reads index 0
            return _affine({0: 1}, start, shape)
        if op in COPIES or op in CASTS:
            x = self.value(args[0])
            if x is None:
                return None
            target = node.info.dtype
            if x.affine is not None:
                if target == torch.bool:
                    return None
                return _affine(dict(x.affine[0]), _convert(x.affine[1], target), shape)
            return _Sym(shape, lambda idx: _convert(x.at(idx), target), None, x.forms)
        if op == "unsqueeze":
            x = self.value(args[0])
            if x is None:
                return None
            rank = len(x.shape)
            new = rank - args[1] % (rank + 1)  # the new dim, counted from the right
            return _remap(x, shape, lambda n: None if n == new else (n if n < new else n - 1))
        if op in RESHAPES or op == "expand":
            x = self.value(args[0])
            if x is None:
                return None
            old = x.shape
            if op == "expand":
                if broadcast_shape(old, shape) != shape:
                    return None
            else:
                strip_old = tuple(s for i, s in enumerate(old) if any(t != 1 for t in old[:i + 1]))
                strip_new = tuple(s for i, s in enumerate(shape) if any(t != 1 for t in shape[:i + 1]))
                if strip_old != strip_new:
                    return None  # only leading 1s may come or go
            return _remap(x, shape, lambda n: n if n < len(old) else None)
        if op == "slice":
            return self._slice(node, shape)
        if op in ("add", "sub"):
            a, b = self.value(args[0]), self.value(args[1])
            alpha = node.kwargs.get("alpha", args[2] if len(args) > 2 else 1)
            if a is None or b is None or not isinstance(alpha, int):
                return None
            sign = alpha if op == "add" else -alpha
            fa, fb = _as_affine(a), _as_affine(b)
            if fa is not None and fb is not None:
                coef = dict(fa[0])
                for d, c in fb[0].items():
                    coef[d] = coef.get(d, 0) + sign * c
                return _affine(coef, fa[1] + sign * fb[1], shape)
            return _step(shape, lambda u, w: u + sign * w, a, b)
        if op in _CMP:
            a, b = self.value(args[0]), self.value(args[1])
            if a is None or b is None:
                return None
            cmp = _CMP[op]
            fa, fb = _as_affine(a), _as_affine(b)
            if fa is not None and fb is not None and (fa[0] or fb[0]):
                # a comparison of affine values changes where their difference crosses zero
                coef = dict(fa[0])
                for d, c in fb[0].items():
                    coef[d] = coef.get(d, 0) - c
                diff = _form(({d: c for d, c in coef.items() if c}, fa[1] - fb[1]))
                return _Sym(shape, lambda idx: cmp(a.at(idx), b.at(idx)), None, (diff,))
            return _step(shape, lambda u, w: cmp(u, w), a, b)
        if op in _LOGIC:
            a, b = self.value(args[0]), self.value(args[1])
            return None if a is None or b is None else _step(shape, _LOGIC[op], a, b)
        if op in ("logical_not", "bitwise_not") and node.info.dtype == torch.bool:
            a = self.value(args[0])
            return None if a is None else _step(shape, lambda u: not u, a)
        if op == "where":
            c, a, b = (self.value(x) for x in args[:3])
            if c is None or a is None or b is None:
                return None
            return _step(shape, lambda p, u, w: u if p else w, c, a, b)
        if op in ("triu", "tril"):
            x = self.value(args[0])
            diagonal = args[1] if len(args) > 1 else node.kwargs.get("diagonal", 0)
            if x is None or len(shape) < 2 or not isinstance(diagonal, int):
                return None
            zero = _convert(0, node.info.dtype)
            offset = _affine({0: 1, 1: -1}, -diagonal, shape)  # j - i - diagonal
            keep = (lambda o: o >= 0) if op == "triu" else (lambda o: o <= 0)
            kept = _step(shape, lambda u: u, x)
            if kept is None:
                return None
            return _Sym(shape, lambda idx: x.at(idx) if keep(offset.at(idx)) else zero, None,
                        kept.forms + (_form(offset.affine),))
        return None

    def _slice(self, node: Node, shape: tuple[int, ...]) -> _Sym | None:
        """``x[..., start::step, ...]`` of an affine value or a constant (``arange(n)[:, None]`` is a full slice and
        an unsqueeze): index k of the result is index ``start + step * k`` of ``x``."""
        x = self.value(node.args[0])
        if x is None:
            return None
        rank = len(x.shape)
        dim = node.args[1] if len(node.args) > 1 else 0
        start = node.args[2] if len(node.args) > 2 else 0
        step = node.args[4] if len(node.args) > 4 else 1
        start = 0 if start is None else start
        if not all(isinstance(v, int) for v in (dim, start, step)) or step < 1 or not -rank <= dim < rank:
            return None
        dim %= rank
        if start < 0 or _run_time(node, 2) or _run_time(node, 4):
            return None  # a start counted from the end, or one that is a size, would be the example's number
        if x.affine is None:  # a constant; a step value's forms would move
            return _const(x.at(lambda k: 0), shape) if not x.forms else None
        right = rank - 1 - dim
        coef = dict(x.affine[0])
        const = x.affine[1] + coef.get(right, 0) * start
        if right in coef:
            coef[right] *= step
        return _affine(coef, const, shape)


def _run_time(node: Node, index: int) -> bool:
    """Whether argument ``index`` of ``node`` is a size of the capture (a symbol), which ``args`` holds as the
    example's number."""
    return node.sym_args is not None and len(node.sym_args) > index and isinstance(node.sym_args[index], Ref)


def masked_keys(mask: _Sym, scores: Sequence[int], test: Callable[[Any], bool]) -> str | None:
    """What the mask does to scores of shape ``scores`` (…, L, S), where ``test(value)`` says whether a mask
    value excludes a key: "causal" (exactly the keys j > i), "none" (no key), or None (anything else).

    Every affine form in the mask must depend on j - i only (coefficients on the last two dims, opposite); the
    mask is then a function of d = j - i that can change only where some form crosses zero, so evaluating it on
    every d from below the lowest crossing to above the highest (and 0) proves it for all sizes."""
    if not broadcastable(mask.shape, scores) or (mask.affine is not None and mask.affine[0]):
        return None
    roots = [0.0]
    for coefs, const in mask.forms:
        c = dict(coefs)
        if set(c) - {0, 1} or c.get(0, 0) != -c.get(1, 0):
            return None
        if c.get(0, 0):
            roots.append(-const / c[0])
    lo, hi = math.floor(min(roots)) - 2, math.ceil(max(roots)) + 2
    if hi - lo > 1 << 16:
        return None
    masked = []
    for d in range(lo, hi + 1):
        i = max(0, -d)
        try:
            masked.append(test(mask.at(lambda k, i=i, d=d: (i + d) if k == 0 else (i if k == 1 else 0))))
        except (TypeError, ValueError):
            return None
    if not any(masked):
        return "none"
    if masked == [d > 0 for d in range(lo, hi + 1)]:
        return "causal"
    return None



class NotAMask(Exception):  # noqa: N818 - a control-flow signal
    """An additive mask holds something other than 0 and -inf."""


def additive_test(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NotAMask
    if value == -math.inf:
        return True
    if value != 0:
        raise NotAMask
    return False



def index_form(graph: ProblemGraph, value: str) -> tuple[dict[int, int], float, set[str]] | None:
    """``value`` as an affine function of its indices, ``({dim_from_right: coefficient}, constant)``, with the nodes
    it is computed from (``arange``s and their views, sums, casts); None where it is not such a constant (a tensor
    that reads data, a comparison, a product of indices)."""
    evaluator = MaskEvaluator(graph)
    sym = evaluator.value(Ref(value))
    if sym is None or sym.affine is None or not sym.affine[0]:
        return None
    coef, const = sym.affine
    if not math.isfinite(const):
        return None
    return dict(coef), const, set(evaluator.nodes)
