"""Family 2 — reductions: softmax, log-softmax, LayerNorm, GroupNorm, RMSNorm, sum/mean, var/std, amax/amin,
max/min with indices, argmax/argmin, vector norms and cross-entropy, each with its pointwise prologue and epilogue,
in one kernel (or, for few long rows, one kernel and a small merging one).

**What a group is.** An anchor (a reduction operator) fixes the *layout*: the reduced input's shape and which
dimensions it reduces — a contiguous range of them. Trailing reduced dimensions give a *row* layout (``n_out`` rows
of ``n_red`` contiguous elements); reduced dimensions followed by others give a *strided* layout (``[n_outer, n_red,
n_inner]``, reduced with loads coalesced along the contiguous inner dimension); GroupNorm's (sample, group) rows are
a row layout of their own. The group then grows around the anchor: pointwise consumers (element-wise on the full
shape or per output row), further reductions over the same rows (a hand-written softmax or LayerNorm: amax, sub,
exp, sum, div), sibling reductions of the same input (``x.mean()`` beside ``x.var()``: one read), ``gather`` along
the reduced dimension (cross-entropy picks the target's log-probability), views that only add or drop size-1
dimensions of per-row values, and the pointwise producers whose every use is inside (a residual ``add``, the
``x.float()`` of RMSNorm, a weight cast). Every value in the kernel is either a *full* tile (one element of the
input's shape per lane) or a *per-row* vector (one per output); per-row values broadcast over the tile.

**How the kernel runs.** Reductions that depend on earlier ones (a hand-written softmax's sum needs the max) are
ordered into *passes*. Strategy ``single`` holds a whole row in registers (``BLOCK_N = next_pow2(n_red)`` at run
time; short rows pack several per program) and runs every pass on it; strategy ``loop`` walks the row in
``BLOCK_N`` chunks once per pass, with per-lane accumulators (sum, max, argmax), an online max/sum for softmax (one
exp per element) and a chunk-wise Welford merge (Chan et al.) for mean and variance — then a last pass writes the
full-shape outputs. Strategy ``split`` (one pass, per-row outputs only) cuts each row into shares reduced by
separate programs into a workspace, and a second kernel merges the shares and computes what follows per row — for
few outputs over long rows (a column minimum, a full sum), which would otherwise leave most SMs idle. Floating math
is fp32 (half inputs are widened on load); results are rounded once, at the store. No atomics: every value is
written by one program, shares merge in a fixed order, so results are deterministic.

**Semantics kept exactly.** NaN propagates as in PyTorch (amax/max/argmax treat NaN as the largest value, its first
index wins); ties go to the first index; LayerNorm/GroupNorm use the biased variance and the graph's eps, var/std
the graph's correction; output dtypes, ``keepdim`` shapes and index dtypes are the graph's. What does not fit
(integer inputs, non-contiguous reduced dimensions, operands that broadcast neither per row nor per element, p-norms
other than 1, 2 and ±inf) stays in PyTorch.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    broadcastable,
    depends_on,
    fusable_pointwise,
    make_group,
)
from kernelwright.generate.graph import Node, ProblemGraph, Ref, node_inputs
from kernelwright.generate.operators import CONSTANTS
from kernelwright.hardware import arch_spec

NAME = "reduction"

FULL, VEC, CONST = "full", "vec", "const"  # a tile of the input's shape, one value per output row, a constant
FLOAT_INPUTS = (torch.float32, torch.float16, torch.bfloat16)
INDEX_SENTINEL = 2147483647  # "no index yet" in argmax accumulators; rows are shorter than 2**31 elements
# Rows up to this many elements are held in registers by default (strategy "single"): 16K fp32 values over 16
# warps is 32 registers a thread. A lead from the usual Triton practice, not yet measured on the H200.
SINGLE_MAX = 16384
# Strategy split aims at this many programs (8 per SM of an H200): enough loads in flight to stream at full
# bandwidth when the outputs are few. A lead, not yet measured.
SPLIT_PROGRAMS = 1024
VIEW_OPS = frozenset({"unsqueeze", "squeeze", "view", "reshape", "_unsafe_view", "alias", "expand"})
INF, NAN = '-float("inf")', 'float("nan")'


# ---------------------------------------------------------------------------------------------------------------
# The group's description: layout, values and the operations that define them
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Which elements reduce together. ``row``: dims ``[start, rank)``; ``strided``: dims ``[start, stop)`` with
    inner dims after them; ``group``: GroupNorm — each (sample, group) of an ``[N, C, *]`` tensor, ``groups`` fixed."""

    kind: str
    shape: tuple[int, ...]
    start: int
    stop: int
    groups: int = 0

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def keep_shape(self) -> tuple[int, ...]:
        if self.kind == "group":
            return (self.shape[0], self.groups)
        return tuple(1 if self.start <= d < self.stop else s for d, s in enumerate(self.shape))

    @property
    def drop_shape(self) -> tuple[int, ...]:
        if self.kind == "group":
            return (self.shape[0], self.groups)
        return tuple(s for d, s in enumerate(self.shape) if not self.start <= d < self.stop)

    @property
    def vec_forms(self) -> tuple[tuple[int, ...], ...]:
        return (self.keep_shape, self.drop_shape)

    def sizes(self) -> tuple[int, int, int]:
        """(outer, reduced, inner) element counts at capture."""
        if self.kind == "group":
            outer = self.shape[0] * self.groups
            return outer, math.prod(self.shape) // max(outer, 1), 1
        return (math.prod(self.shape[:self.start]), math.prod(self.shape[self.start:self.stop]),
                math.prod(self.shape[self.stop:]))


@dataclass(frozen=True, kw_only=True)
class Op:
    """Defines one value (``reduce``: several, its ``results``) of the kernel.

    kinds: ``node`` (a graph pointwise node, through :class:`expr.PointwiseEmitter`), ``expr`` (a Triton expression
    over ``deps``: ``{0}``, ``{1}``, ...), ``alias`` (another value: getitem, a view of a per-row value), ``reduce``
    (over the row, of the full value ``deps[0]``), ``gather`` (full value ``deps[0]`` at the per-row reduced index
    ``deps[1]``), ``load`` (input ``deps[0]`` read through a special addressing, ``cls``)."""

    name: str
    level: str
    kind: str
    deps: tuple[str, ...] = ()
    node: str = ""
    template: str = ""
    dtype: torch.dtype = torch.float32
    reduce: str = ""
    results: tuple[str, ...] = ()
    cls: str = ""
    about: str = ""


@dataclass
class Spec:
    layout: Layout
    anchor: str
    ops: list[Op] = field(default_factory=list)
    producer: dict[str, Op] = field(default_factory=dict)  # value -> the op that defines it
    members: list[str] = field(default_factory=list)  # graph nodes the group computes

    def add(self, ops: Iterable[Op], members: Iterable[str]) -> None:
        for op in ops:
            self.ops.append(op)
            for name in op.results or (op.name,):
                self.producer[name] = op
        self.members.extend(members)

    def has(self, value: str) -> bool:
        return value in self.producer

    def level(self, value: str) -> str:
        op = self.producer[value]
        return VEC if op.kind == "reduce" else op.level

    def uses(self, value: str) -> set[str]:
        """The levels at which the group's ops read ``value``."""
        levels: set[str] = set()
        for op in self.ops:
            if value not in op.deps:
                continue
            if op.kind == "reduce" or (op.kind == "gather" and op.deps[0] == value):
                levels.add(FULL)
            elif op.kind == "gather":
                levels.add(VEC)
            elif op.kind == "load":
                levels.add("special")
            else:
                levels.add(FULL if op.level == CONST else op.level)
        return levels

    def outside(self) -> list[str]:
        seen: list[str] = []
        for op in self.ops:
            for d in op.deps:
                if d not in self.producer and d not in seen:
                    seen.append(d)
        return seen


def full_class(layout: Layout, shape: Sequence[int]) -> str | None:
    """How an operand of ``shape`` is read where the kernel works on full tiles."""
    shape = tuple(shape)
    if math.prod(shape) == 1:
        return "scalar"
    if not broadcastable(shape, layout.shape):
        return None
    if shape == layout.shape:
        return "full"
    if layout.kind != "group":
        padded = (1,) * (layout.rank - len(shape)) + shape
        reduced = [layout.start <= d < layout.stop for d in range(layout.rank)]
        if all(padded[d] == (layout.shape[d] if r else 1) for d, r in enumerate(reduced)):
            return "reduced"  # varies along the reduced dims only (a LayerNorm weight)
        if all(padded[d] == (1 if r else layout.shape[d]) for d, r in enumerate(reduced)):
            return "vec"  # one value per output row (a keepdim statistic)
    return "strided"


def vec_class(layout: Layout, shape: Sequence[int]) -> str | None:
    """How an operand of ``shape`` is read where the kernel works on per-row vectors."""
    shape = tuple(shape)
    if math.prod(shape) == 1:
        return "scalar"
    for form in layout.vec_forms:
        if len(shape) <= len(form) and (1,) * (len(form) - len(shape)) + shape == form:
            return "vec"
    return None


# ---------------------------------------------------------------------------------------------------------------
# Anchors: the reduction operators and what they compute
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class _Anchor:
    layout: Layout
    ops: list[Op]
    members: list[str]


def _arg(node: Node, index: int, key: str, default: Any) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(key, default)


def _data(graph: ProblemGraph, node: Node) -> tuple[str, tuple[int, ...]] | None:
    a = node.args[0] if node.args else None
    if not isinstance(a, Ref) or a.name not in graph.values:
        return None
    info = graph.info(a.name)
    if info.dtype not in FLOAT_INPUTS or not info.shape:
        return None
    return a.name, tuple(info.shape)


def _layout(shape: tuple[int, ...], dims: Any) -> Layout | None:
    rank = len(shape)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(rank))
    elif isinstance(dims, int):
        dims = [dims]
    if not all(isinstance(d, int) and -rank <= d < rank for d in dims):
        return None
    ds = sorted({d % rank for d in dims})
    if ds != list(range(ds[0], ds[-1] + 1)):
        return None  # reduced dims that are not contiguous in memory
    start, stop = ds[0], ds[-1] + 1
    return Layout(kind="row" if stop == rank else "strided", shape=shape, start=start, stop=stop)


def _getitems(graph: ProblemGraph, node: Node) -> dict[int, str]:
    return {u.args[1]: u.name for u in graph.consumers(node.name) if u.target is operator.getitem}


def _sum_mean(graph: ProblemGraph, node: Node) -> _Anchor | None:
    data = _data(graph, node)
    dtype = node.kwargs.get("dtype")
    if data is None or (dtype is not None and dtype not in FLOAT_INPUTS):
        return None
    x, shape = data
    layout = _layout(shape, _arg(node, 1, "dim", None))
    if layout is None:
        return None
    n = node.name
    if node.op == "sum":
        return _Anchor(layout, [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="sum", deps=(x,),
                                   results=(n,), about="sum")], [n])
    return _Anchor(layout, [
        Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="sum", deps=(x,), results=(f"{n}__sum",),
           about="sum for the mean"),
        Op(name=n, level=VEC, kind="expr", template="{0} / n_red", deps=(f"{n}__sum",)),
    ], [n])


def _extremum(graph: ProblemGraph, node: Node) -> _Anchor | None:
    """amax/amin, max/min (all elements, or .dim with indices), argmax/argmin."""
    data = _data(graph, node)
    if data is None:
        return None
    x, shape = data
    n = node.name
    lowest = node.op in ("amin", "min", "argmin")
    kind = "min" if lowest else "max"
    if node.op in ("amax", "amin"):
        layout = _layout(shape, _arg(node, 1, "dim", []))
        ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce=kind, deps=(x,), results=(n,), about=kind)]
        return None if layout is None else _Anchor(layout, ops, [n])
    if node.op in ("argmax", "argmin"):
        layout = _layout(shape, _arg(node, 1, "dim", None))
        ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="arg" + kind, deps=(x,),
                  results=(f"{n}__value", n), about=f"arg{kind} (first index on ties)")]
        return None if layout is None else _Anchor(layout, ops, [n])
    if node.info is not None:  # max.default / min.default: the extremum of every element
        layout = _layout(shape, None)
        ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce=kind, deps=(x,), results=(n,), about=kind)]
        return _Anchor(layout, ops, [n]) if layout else None
    layout = _layout(shape, _arg(node, 1, "dim", None))  # max.dim / min.dim: values and indices
    items = _getitems(graph, node)
    if layout is None or not set(items) <= {0, 1}:
        return None
    results = (f"{n}__values", f"{n}__indices")
    if 1 in items:
        ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="arg" + kind, deps=(x,), results=results,
                  about=f"{kind} and its first index")]
    else:  # only the values are used: no index bookkeeping
        ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce=kind, deps=(x,), results=results[:1],
                  about=kind)]
    ops += [Op(name=g, level=VEC, kind="alias", deps=(results[i],), dtype=torch.int64 if i else torch.float32)
            for i, g in items.items()]
    return _Anchor(layout, ops, [n, *items.values()])


def _softmax(graph: ProblemGraph, node: Node) -> _Anchor | None:
    data = _data(graph, node)
    if data is None:
        return None
    x, shape = data
    layout = _layout(shape, _arg(node, 1, "dim", -1))
    if layout is None or layout.stop - layout.start != 1:
        return None
    n = node.name
    mx, sm = f"{n}__max", f"{n}__sumexp"
    template = "tl.exp({0} - {1}) / {2}" if node.op == "_softmax" else "{0} - {1} - tl.log({2})"
    return _Anchor(layout, [
        Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="lse", deps=(x,), results=(mx, sm),
           about="max and sum of exp(x - max)"),
        Op(name=n, level=FULL, kind="expr", template=template, deps=(x, mx, sm)),
    ], [n])


def _normalize(n: str, x: str, weight: Any, bias: Any, eps: float, *, weight_value: str | None = None,
               bias_value: str | None = None) -> list[Op]:
    """Welford mean/variance, rstd = rsqrt(var + eps) (biased variance, as PyTorch), (x - mean) * rstd * w + b."""
    mean, m2, rstd, out = f"{n}__mean", f"{n}__m2", f"{n}__rstd", f"{n}__out"
    template, deps = "({0} - {1}) * {2}", [x, mean, rstd]
    for operand in (weight_value or (weight.name if isinstance(weight, Ref) else None),):
        if operand:
            template += f" * {{{len(deps)}}}"
            deps.append(operand)
    for operand in (bias_value or (bias.name if isinstance(bias, Ref) else None),):
        if operand:
            template += f" + {{{len(deps)}}}"
            deps.append(operand)
    return [
        Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="welford", deps=(x,), results=(mean, m2),
           about="mean and variance"),
        Op(name=rstd, level=VEC, kind="expr", template=f"tl.rsqrt({{0}} / n_red + {float(eps)!r})", deps=(m2,)),
        Op(name=out, level=FULL, kind="expr", template=template, deps=tuple(deps)),
    ]


def _layer_norm(graph: ProblemGraph, node: Node) -> _Anchor | None:
    data = _data(graph, node)
    if data is None:
        return None
    x, shape = data
    normalized, weight, bias, eps = node.args[1], _arg(node, 2, "weight", None), _arg(node, 3, "bias", None), \
        _arg(node, 4, "eps", 1e-5)
    k = len(normalized)
    if k == 0 or k > len(shape) or tuple(shape[-k:]) != tuple(normalized):
        return None
    layout = Layout(kind="row", shape=shape, start=len(shape) - k, stop=len(shape))
    n = node.name
    ops = _normalize(n, x, weight, bias, eps)
    return _norm_anchor(graph, node, layout, ops)


def _norm_anchor(graph: ProblemGraph, node: Node, layout: Layout, ops: list[Op]) -> _Anchor:
    """A norm's anchor: its ops, plus the getitems of its (out, mean, rstd) outputs as aliases."""
    n = node.name
    items = _getitems(graph, node)
    roles = {0: f"{n}__out", 1: f"{n}__mean", 2: f"{n}__rstd"}
    ops = ops + [Op(name=g, level=FULL if i == 0 else VEC, kind="alias", deps=(roles[i],))
                 for i, g in items.items()]
    return _Anchor(layout, ops, [n, *items.values()])


def _group_norm(graph: ProblemGraph, node: Node) -> _Anchor | None:
    data = _data(graph, node)
    if data is None or len(node.args) < 8:
        return None
    x, shape = data
    weight, bias, groups, eps = node.args[1], node.args[2], node.args[6], node.args[7]
    if len(shape) < 2 or not isinstance(groups, int) or groups <= 0 or shape[1] % groups:
        return None
    layout = Layout(kind="group", shape=shape, start=1, stop=len(shape), groups=groups)
    n = node.name
    loads = []
    # weight[c] / bias[c] with c = group * (C / G) + position_in_group // (H * W): read per element ("channel").
    for role, operand in (("weight", weight), ("bias", bias)):
        if isinstance(operand, Ref):
            loads.append(Op(name=f"{n}__{role}", level=FULL, kind="load", deps=(operand.name,), cls="channel"))
    ops = loads + _normalize(n, x, None, None, eps,
                             weight_value=f"{n}__weight" if isinstance(weight, Ref) else None,
                             bias_value=f"{n}__bias" if isinstance(bias, Ref) else None)
    return _norm_anchor(graph, node, layout, ops)


def _vector_norm(graph: ProblemGraph, node: Node) -> _Anchor | None:
    data = _data(graph, node)
    dtype = node.kwargs.get("dtype")
    if data is None or (dtype is not None and dtype not in FLOAT_INPUTS):
        return None
    x, shape = data
    order = _arg(node, 1, "ord", 2)
    layout = _layout(shape, _arg(node, 2, "dim", None))
    if layout is None:
        return None
    n = node.name
    part, red, acc = f"{n}__term", f"{n}__reduce", f"{n}__acc"
    if order == 2:
        terms, kind, finish = "{0} * {0}", "sum", "tl.sqrt_rn({0})"
    elif order == 1:
        terms, kind, finish = "tl.abs({0})", "sum", None
    elif order == math.inf:
        terms, kind, finish = "tl.abs({0})", "max", None
    elif order == -math.inf:
        terms, kind, finish = "tl.abs({0})", "min", None
    else:
        return None
    ops = [Op(name=part, level=FULL, kind="expr", template=terms, deps=(x,)),
           Op(name=red, level=VEC, kind="reduce", reduce=kind, deps=(part,), results=(acc if finish else n,),
              about=f"{kind} of {terms.format('|x|' if 'abs' in terms else 'x')}")]
    if finish:
        ops.append(Op(name=n, level=VEC, kind="expr", template=finish, deps=(acc,)))
    return _Anchor(layout, ops, [n])


def _variance(graph: ProblemGraph, node: Node) -> _Anchor | None:
    """var / std / var_mean / std_mean with a correction (Bessel's by default), from Welford's mean and M2."""
    data = _data(graph, node)
    if data is None:
        return None
    x, shape = data
    correction = node.kwargs.get("correction", 1)
    correction = 1 if correction is None else correction
    if not isinstance(correction, (int, float)):
        return None
    layout = _layout(shape, _arg(node, 1, "dim", None))
    if layout is None:
        return None
    n = node.name
    mean, m2, var = f"{n}__mean", f"{n}__m2", f"{n}__var"
    finish = "tl.sqrt_rn({0})" if node.op.startswith("std") else "{0}"
    ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="welford", deps=(x,), results=(mean, m2),
              about="mean and variance"),
           Op(name=var, level=VEC, kind="expr", deps=(m2,),
              template=finish.format(f"({{0}} / tl.maximum(n_red - {float(correction)!r}, 0.0))"))]
    if node.info is not None:  # var, std: one result
        return _Anchor(layout, [*ops[:1], Op(name=n, level=VEC, kind="expr", deps=(m2,), template=ops[1].template)],
                       [n])
    items = _getitems(graph, node)
    if not set(items) <= {0, 1}:
        return None
    roles = {0: var, 1: mean}
    ops += [Op(name=g, level=VEC, kind="alias", deps=(roles[i],)) for i, g in items.items()]
    return _Anchor(layout, ops, [n, *items.values()])


ANCHORS = {
    "sum": _sum_mean, "mean": _sum_mean, "amax": _extremum, "amin": _extremum, "max": _extremum, "min": _extremum,
    "argmax": _extremum, "argmin": _extremum, "_softmax": _softmax, "_log_softmax": _softmax,
    "native_layer_norm": _layer_norm, "native_group_norm": _group_norm, "linalg_vector_norm": _vector_norm,
    "var": _variance, "std": _variance, "var_mean": _variance, "std_mean": _variance,
}  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Growing a group around its anchor
# ---------------------------------------------------------------------------------------------------------------
def _emittable(graph: ProblemGraph, node: Node) -> bool:
    """Whether the pointwise emitter writes this node with these arguments."""
    env = {v: expr.Value(f"t_{v}", expr.compute_dtype(graph.info(v).dtype)) for v in node_inputs(node)
           if v in graph.values}
    try:
        expr.PointwiseEmitter("t").emit(node, env)
    except (expr.Unsupported, KeyError, TypeError, ValueError):
        return False
    return True


def _operand_ok(graph: ProblemGraph, layout: Layout, value: str, level: str) -> bool:
    if value not in graph.values or graph.info(value).dtype not in expr.TL_DTYPE:
        return False
    shape = graph.info(value).shape
    if level == FULL:
        return full_class(layout, shape) is not None
    return vec_class(layout, shape) is not None


class _Grower:
    def __init__(self, graph: ProblemGraph, spec: Spec, claimed: set[str]) -> None:
        self.graph, self.spec, self.claimed = graph, spec, claimed

    @property
    def layout(self) -> Layout:
        return self.spec.layout

    def _free(self, node: Node) -> bool:
        return node.name not in self.claimed and node.name not in self.spec.members

    def _no_cycle(self, outside: Iterable[str]) -> bool:
        members, memo = set(self.spec.members), {}
        return not any(depends_on(self.graph, v, members, memo) for v in outside)

    def grow(self) -> None:
        anchor_index = next(i for i, n in enumerate(self.graph.nodes) if n.name == self.spec.anchor)
        changed = True
        while changed:
            changed = False
            for node in self.graph.nodes[anchor_index + 1:]:
                if self._free(node) and any(self.spec.has(v) for v in node_inputs(node)):
                    changed |= self.consumer(node)
                elif self._free(node) and node.op in ANCHORS:
                    changed |= self.sibling(node)
            for value in self.spec.outside():
                changed |= self.producer(value)

    # -- consumers: pointwise epilogues, views, further reductions, gathers ---------------------------------------
    def consumer(self, node: Node) -> bool:
        graph, spec, layout = self.graph, self.spec, self.layout
        inputs = node_inputs(node)
        outside = [v for v in inputs if not spec.has(v)]
        if node.op in ANCHORS:  # (multi-output anchors have no info of their own: their getitems do)
            anchor = ANCHORS[node.op](graph, node)
            if anchor is None or anchor.layout != layout or not spec.has(inputs[0]) or \
                    spec.level(inputs[0]) != FULL or not self._no_cycle(outside):
                return False
            if not all(_operand_ok(graph, layout, v, FULL) for v in outside):
                return False
            spec.add(anchor.ops, anchor.members)
            return True
        if node.info is None:
            return False
        shape = tuple(node.info.shape)
        if node.op == "gather":
            return self._gather(node, outside)
        if node.op in VIEW_OPS:
            source = inputs[0] if inputs else None
            if source is None or not spec.has(source):
                return False
            level = spec.level(source)
            if (level == VEC and shape in layout.vec_forms) or (level == FULL and shape == layout.shape):
                spec.add([Op(name=node.name, level=level, kind="alias", deps=(source,))], [node.name])
                return True
            if node.op == "expand" and level == VEC and shape == layout.shape and layout.kind != "group":
                # a per-row value spread over the full shape: the tile broadcasts it anyway
                spec.add([Op(name=node.name, level=FULL, kind="alias", deps=(source,))], [node.name])
                return True
            return False
        if not fusable_pointwise(node) or node.op in CONSTANTS or not _emittable(graph, node):
            return False
        levels = {spec.level(v) for v in inputs if spec.has(v)}
        if FULL in levels:
            level = FULL if shape == layout.shape else None
        elif shape in layout.vec_forms:
            level = VEC
        elif shape == layout.shape:
            level = FULL
        else:
            level = None
        if level is None or levels <= {CONST}:
            return False
        if not all(_operand_ok(graph, layout, v, level) for v in outside) or not self._no_cycle(outside):
            return False
        spec.add([Op(name=node.name, level=level, kind="node", deps=tuple(inputs), node=node.name)], [node.name])
        return True

    def sibling(self, node: Node) -> bool:
        """Another reduction of an input the group already reads whole, over the same rows (x.mean() and x.var(),
        amax and argmax): computed in the same pass, so the input is read once."""
        graph, spec = self.graph, self.spec
        inputs = node_inputs(node)
        if not inputs or spec.has(inputs[0]) or FULL not in spec.uses(inputs[0]) or \
                tuple(graph.info(inputs[0]).shape) != self.layout.shape:
            return False
        anchor = ANCHORS[node.op](graph, node)
        if anchor is None or anchor.layout != self.layout or any(not self._free(graph.node(m)) for m in anchor.members):
            return False
        outside = [v for v in inputs if not spec.has(v)]
        if not all(_operand_ok(graph, self.layout, v, FULL) for v in outside) or not self._no_cycle(outside):
            return False
        spec.add(anchor.ops, anchor.members)
        return True

    def _gather(self, node: Node, outside: list[str]) -> bool:
        graph, spec, layout = self.graph, self.spec, self.layout
        source, dim, index = (node.args + (None,) * 3)[:3]
        if not (isinstance(source, Ref) and isinstance(index, Ref) and isinstance(dim, int)):
            return False
        if node.kwargs.get("sparse_grad") or layout.kind == "group" or layout.stop - layout.start != 1:
            return False
        if not spec.has(source.name) or spec.level(source.name) != FULL or dim % layout.rank != layout.start:
            return False
        if index.name not in graph.values or graph.info(index.name).dtype not in (torch.int64, torch.int32):
            return False
        if tuple(graph.info(index.name).shape) != layout.keep_shape or tuple(node.info.shape) != layout.keep_shape:
            return False
        if spec.has(index.name):
            if spec.level(index.name) != VEC:
                return False
        elif not _operand_ok(graph, layout, index.name, VEC):
            return False
        if not self._no_cycle(outside):
            return False
        spec.add([Op(name=node.name, level=VEC, kind="gather", deps=(source.name, index.name))], [node.name])
        return True

    # -- producers: pointwise nodes whose every use is inside the group -----------------------------------------
    def producer(self, value: str) -> bool:
        graph, spec, layout = self.graph, self.spec, self.layout
        try:
            node = graph.node(value)
        except KeyError:
            return False  # a placeholder
        users = graph.users.get(value, [])
        if not self._free(node) or value in graph.outputs or node.info is None or \
                not all(u in spec.members for u in users):
            return False
        levels = spec.uses(value)
        shape = tuple(node.info.shape)
        inputs = node_inputs(node)
        if node.op in CONSTANTS:
            if not _emittable(graph, node) or "special" in levels:
                return False
            spec.add([Op(name=value, level=CONST, kind="node", deps=tuple(inputs), node=value)], [value])
            return True
        if len(levels) != 1 or not self._no_cycle(inputs):
            return False
        (level,) = levels
        if node.op in VIEW_OPS:
            if level != VEC or shape not in layout.vec_forms or not inputs or \
                    vec_class(layout, graph.info(inputs[0]).shape) != "vec":
                return False
            spec.add([Op(name=value, level=VEC, kind="alias", deps=(inputs[0],))], [value])
            return True
        if not fusable_pointwise(node) or not _emittable(graph, node):
            return False
        if level == FULL and not broadcastable(shape, layout.shape):
            return False
        if level == VEC and vec_class(layout, shape) is None:
            return False
        if not all(_operand_ok(graph, layout, v, level) for v in inputs):
            return False
        spec.add([Op(name=value, level=level, kind="node", deps=tuple(inputs), node=value)], [value])
        return True


def _validate(graph: ProblemGraph, spec: Spec, group: Group) -> bool:
    layout = spec.layout
    for o in group.outputs:
        info = graph.values.get(o)
        if info is None or info.dtype not in expr.TL_DTYPE or not spec.has(o):
            return False
        level = spec.level(o)
        if (level == FULL and tuple(info.shape) != layout.shape) or \
                (level == VEC and tuple(info.shape) not in layout.vec_forms) or level == CONST:
            return False
    # The launcher reads the sizes from a full-shape input.
    return any(tuple(graph.info(v).shape) == layout.shape and FULL in spec.uses(v) for v in group.inputs)


# ---------------------------------------------------------------------------------------------------------------
# Writing the kernel
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class _Ctx:
    """Where code is being written: ``tile`` (a [rows, chunk] tile), ``vec`` (one value per output row) or
    ``gather`` (full-level values re-evaluated at one reduced index per row)."""

    kind: str
    prefix: str
    lines: list[str]
    pad: str
    env: dict[str, expr.Value] = field(default_factory=dict)
    offs: str = "offs"
    mask: str = "mask"
    index: str = ""  # gather: the reduced index per row

    def emit(self, line: str) -> None:
        self.lines.append(self.pad + line)


class _Writer:
    """Writes one kernel's body. ``part``: ``whole`` (strategies single and loop), or for strategy split the
    ``partial`` kernel (a share of each row, partial results to a workspace) and the ``combine`` kernel (merges
    the partial results, then everything per row)."""

    def __init__(self, graph: ProblemGraph, group: Group, spec: Spec, config: Config, part: str = "whole") -> None:
        self.graph, self.group, self.spec, self.config, self.part = graph, group, spec, config, part
        self.layout = spec.layout
        self.strided = self.layout.kind == "strided"
        self.axis = 0 if self.strided else 1
        self.tile = "[BLOCK_N, BLOCK_M]" if self.strided else "[BLOCK_M, BLOCK_N]"
        self.q = "offs_q" if self.strided or part == "combine" else "offs_m"  # output (row) index
        self.qmask = "mask_q" if part == "combine" else "mask_i" if self.strided else "mask_m"
        self.single = config["strategy"] == "single"
        # the reduced range a program walks: the whole row, or its share of it (split)
        self.lo, self.hi = ("lo", "hi") if part == "partial" else ("0", "n_red")
        self.lines: list[str] = []
        self.vec = _Ctx("vec", "s", self.lines, "    ")
        self.top: dict[str, expr.Value] = {}  # scalar operands, loaded once
        self.gathers = 0
        self.lines_top: list[str] = []  # operands loaded once, before the passes
        self.strided_inputs: list[str] = []
        self.channel_loads = False
        self._phase: dict[str, int] = {}
        self._scalar: dict[str, bool] = {}

    # -- shapes and broadcasting ------------------------------------------------------------------------------
    def bcast(self, name: str) -> str:
        """A per-row vector spread over the tile."""
        return f"{name}[None, :]" if self.strided else f"{name}[:, None]"

    def bcast_n(self, name: str) -> str:
        """A per-reduced-index vector spread over the tile."""
        return f"{name}[:, None]" if self.strided else f"{name}[None, :]"

    def phase(self, name: str) -> int:
        """Values of phase p are available in pass p (full) or before it (per-row)."""
        if name not in self._phase:
            op = self.spec.producer.get(name)
            if op is None:
                self._phase[name] = 0
            elif op.kind == "reduce":
                self._phase[name] = self.phase(op.deps[0]) + 1
            else:
                self._phase[name] = max((self.phase(d) for d in op.deps), default=0)
        return self._phase[name]

    def scalar(self, name: str) -> bool:
        """Whether the value is one number for the whole kernel (a constant, a one-element operand)."""
        if name not in self._scalar:
            op = self.spec.producer.get(name)
            if op is None:
                self._scalar[name] = math.prod(self.graph.info(name).shape) == 1
            elif op.kind in ("reduce", "gather", "load"):
                self._scalar[name] = False
            else:
                self._scalar[name] = all(self.scalar(d) for d in op.deps)
        return self._scalar[name]

    # -- values on demand --------------------------------------------------------------------------------------
    def need(self, name: str, ctx: _Ctx) -> expr.Value:
        if name in ctx.env:
            return ctx.env[name]
        if name in self.top:
            return self.top[name]
        op = self.spec.producer.get(name)
        if op is None:
            return self.load(name, ctx)
        level = VEC if op.kind == "reduce" else op.level
        if level == VEC:
            if ctx.kind == "vec":
                self.write_op(op, ctx)
                return ctx.env[name]
            value = self.vec.env.get(name)
            if value is None:
                raise AssertionError(f"per-row value {name} used before it is computed")
            if ctx.kind == "gather" or self.scalar(name):
                return value
            return expr.Value(self.bcast(value.expr), value.dtype)
        if level == FULL and ctx.kind == "vec":
            raise AssertionError(f"full value {name} used per row")
        self.write_op(op, ctx)
        return ctx.env[name]

    def load(self, name: str, ctx: _Ctx) -> expr.Value:
        info = self.graph.info(name)
        cdt = expr.compute_dtype(info.dtype)
        widen = f".to({expr.TL_DTYPE[cdt]})" if cdt != info.dtype else ""
        if ctx.kind == "vec":
            cls = vec_class(self.layout, info.shape)
        else:
            cls = full_class(self.layout, info.shape)
        if cls == "scalar":
            self.top[name] = expr.Value(f"xs_{name}", cdt)
            self.lines_top.append(f"    xs_{name} = tl.load(in_{name}){widen}")
            return self.top[name]
        if cls == "vec":
            if name not in self.vec.env:
                self.lines_top.append(f"    xq_{name} = tl.load(in_{name} + {self.q}, mask={self.qmask}, other=0)"
                                      f"{widen}")
                self.vec.env[name] = expr.Value(f"xq_{name}", cdt)
            value = self.vec.env[name]
            if ctx.kind == "tile":
                return expr.Value(self.bcast(value.expr), cdt)
            return value
        if ctx.kind == "gather":
            var = f"{ctx.prefix}_x_{name}"
            if cls == "full":
                at = ctx.offs
            elif cls == "reduced":
                at = ctx.index
            else:
                at = self.strided_offset(name, ctx.offs)
            ctx.emit(f"{var} = tl.load(in_{name} + {at}, mask={ctx.mask}, other=0){widen}")
            ctx.env[name] = expr.Value(var, cdt)
            return ctx.env[name]
        if cls == "full":
            ctx.emit(f"x_{name} = tl.load(in_{name} + offs, mask=mask, other=0){widen}")
            ctx.env[name] = expr.Value(f"x_{name}", cdt)
        elif cls == "reduced":
            ctx.emit(f"xn_{name} = tl.load(in_{name} + offs_n, mask=mask_n, other=0){widen}")
            ctx.env[name] = expr.Value(self.bcast_n(f"xn_{name}"), cdt)
        elif cls == "strided":
            ctx.emit(f"x_{name} = tl.load(in_{name} + {self.strided_offset(name, 'offs')}, mask=mask, other=0)"
                     f"{widen}")
            ctx.env[name] = expr.Value(f"x_{name}", cdt)
        else:
            raise AssertionError(f"operand {name} of shape {info.shape} has no addressing")
        return ctx.env[name]

    def strided_offset(self, name: str, offs: str) -> str:
        """The address of a broadcast operand from the flat index of the element in the full shape."""
        if name not in self.strided_inputs:
            self.strided_inputs.append(name)
        shape = self.layout.shape
        operand = tuple(self.graph.info(name).shape)
        padded = (1,) * (len(shape) - len(operand)) + operand
        terms = []
        for d in range(len(shape)):
            if padded[d] == 1:
                continue
            inner = " * ".join(f"size_{e}" for e in range(d + 1, len(shape)))
            position = f"({offs} // ({inner}))" if inner else offs
            if d > 0:
                position = f"({position} % size_{d})"
            terms.append(f"{position} * stride_{name}_{d}")
        return "(" + " + ".join(terms) + ")" if terms else "0"

    def write_op(self, op: Op, ctx: _Ctx) -> None:
        if op.kind == "alias":
            ctx.env[op.name] = self.need(op.deps[0], ctx)
        elif op.kind == "node":
            node = self.graph.node(op.node)
            env = {v: self.need(v, ctx) for v in node_inputs(node)}
            emitter = expr.PointwiseEmitter(ctx.prefix)
            ctx.env[op.name] = emitter.emit(node, env)
            for line in emitter.lines:
                ctx.emit(line)
        elif op.kind == "expr":
            values = [self.need(d, ctx) for d in op.deps]
            var = f"{ctx.prefix}_{op.name}"
            ctx.emit(f"{var} = {op.template.format(*(v.expr for v in values))}")
            ctx.env[op.name] = expr.Value(var, op.dtype)
        elif op.kind == "load":  # GroupNorm's per-channel weight and bias
            source = op.deps[0]
            info = self.graph.info(source)
            cdt = expr.compute_dtype(info.dtype)
            widen = f".to({expr.TL_DTYPE[cdt]})" if cdt != info.dtype else ""
            self.channel_loads = True
            if "channel" not in ctx.env:
                ctx.emit(f"channel = (offs_m % {self.layout.groups})[:, None] * cpg + offs_n[None, :] // hw"
                         "  # the channel of each element")
                ctx.env["channel"] = expr.Value("channel", torch.int32)
            ctx.emit(f"x_{op.name} = tl.load(in_{source} + channel, mask=mask, other=0){widen}")
            ctx.env[op.name] = expr.Value(f"x_{op.name}", cdt)
        elif op.kind == "gather":
            self.write_gather(op, ctx)
        else:
            raise AssertionError(f"{op.kind} {op.name} is written by its pass")

    def write_gather(self, op: Op, ctx: _Ctx) -> None:
        self.gathers += 1
        g = f"g{self.gathers}"
        index = self.need(op.deps[1], ctx)
        base = "base" if self.strided else "row_start"
        step = " * n_inner" if self.strided else ""
        ctx.emit(f"# {op.name}: the full-shape value {op.deps[0]} at one reduced index per row")
        ctx.emit(f"{g}_index = {index.expr}")
        ctx.emit(f"{g}_mask = {self.qmask} & ({g}_index >= 0) & ({g}_index < n_red)")
        ctx.emit(f"{g}_offs = {base} + {g}_index{step}")
        gctx = _Ctx("gather", g, ctx.lines, ctx.pad, offs=f"{g}_offs", mask=f"{g}_mask", index=f"{g}_index")
        value = self.need(op.deps[0], gctx)
        ctx.emit(f"s_{op.name} = {value.expr}")
        ctx.env[op.name] = expr.Value(f"s_{op.name}", value.dtype)

    # -- the reductions -----------------------------------------------------------------------------------------
    def reduce_direct(self, op: Op, ctx: _Ctx) -> None:
        """A reduction over a row held whole in registers."""
        src = self.need(op.deps[0], ctx).expr
        ax, r, t = self.axis, op.results, f"t_{op.name}"
        out = [f"s_{v}" for v in r]
        kind = op.reduce
        if kind == "sum":
            ctx.emit(f"{out[0]} = tl.sum(tl.where(mask, {src}, 0.0), axis={ax})")
        elif kind in ("max", "min", "argmax", "argmin"):
            big = INF if kind.endswith("max") else INF[1:]
            fn = "tl.max" if kind.endswith("max") else "tl.min"
            value = out[0]
            ctx.emit(f"{t} = tl.where(mask, {src}, {big})")
            ctx.emit(f"{t}_nan = tl.max(({t} != {t}).to(tl.int32), axis={ax}) > 0  # NaN wins, as in PyTorch")
            ctx.emit(f"{value} = tl.where({t}_nan, {NAN}, {fn}({t}, axis={ax}))")
            if kind.startswith("arg"):
                hit = f"mask & (({t} == {self.bcast(value)}) | (({t} != {t}) & {self.bcast(t + '_nan')}))"
                ctx.emit(f"{t}_hit = {hit}")
                ctx.emit(f"{out[1]} = tl.min(tl.where({t}_hit, {self.bcast_n('offs_n')}, {INDEX_SENTINEL}), "
                         f"axis={ax}).to(tl.int64)  # the first index of the extremum")
        elif kind == "lse":
            # exp(x - max) is written as the softmax epilogue writes it, so the compiler computes it once.
            ctx.emit(f"{out[0]} = tl.max(tl.where(mask, {src}, {INF}), axis={ax})")
            ctx.emit(f"{out[1]} = tl.sum(tl.where(mask, tl.exp({src} - {self.bcast(out[0])}), 0.0), axis={ax})")
        elif kind == "welford":
            ctx.emit(f"{out[0]} = tl.sum(tl.where(mask, {src}, 0.0), axis={ax}) / n_red")
            ctx.emit(f"{t} = tl.where(mask, {src} - {self.bcast(out[0])}, 0.0)")
            ctx.emit(f"{out[1]} = tl.sum({t} * {t}, axis={ax})")
        else:
            raise AssertionError(kind)
        self.define(op)

    def reduce_init(self, op: Op) -> list[str]:
        a, out, kind = f"acc_{op.name}", [f"s_{v}" for v in op.results], op.reduce
        if kind == "sum":
            return [f"{a} = tl.zeros({self.tile}, tl.float32)"]
        if kind in ("max", "min"):
            return [f"{a} = tl.full({self.tile}, {INF if kind == 'max' else INF[1:]}, tl.float32)"]
        if kind in ("argmax", "argmin"):
            return [f"{a} = tl.full({self.tile}, {INF if kind == 'argmax' else INF[1:]}, tl.float32)",
                    f"{a}_index = tl.full({self.tile}, {INDEX_SENTINEL}, tl.int32)"]
        if kind == "lse":
            return [f"{out[0]} = tl.full([BLOCK_M], {INF}, tl.float32)", f"{out[1]} = tl.zeros([BLOCK_M], tl.float32)"]
        if kind == "welford":
            return [f"{out[0]} = tl.zeros([BLOCK_M], tl.float32)", f"{out[1]} = tl.zeros([BLOCK_M], tl.float32)"]
        raise AssertionError(kind)

    def reduce_update(self, op: Op, ctx: _Ctx) -> None:
        src = self.need(op.deps[0], ctx).expr
        ax, a, t, out, kind = self.axis, f"acc_{op.name}", f"t_{op.name}", [f"s_{v}" for v in op.results], op.reduce
        if kind == "sum":
            ctx.emit(f"{a} += tl.where(mask, {src}, 0.0)")
        elif kind in ("max", "min"):
            fn = "tl.maximum" if kind == "max" else "tl.minimum"
            ctx.emit(f"{a} = {fn}({a}, tl.where(mask, {src}, {INF if kind == 'max' else INF[1:]}), "
                     "propagate_nan=tl.PropagateNan.ALL)")
        elif kind in ("argmax", "argmin"):
            better = ">" if kind == "argmax" else "<"
            ctx.emit(f"{t} = tl.where(mask, {src}, {INF if kind == 'argmax' else INF[1:]})")
            ctx.emit(f"{t}_take = mask & (({t} {better} {a}) | ({a}_index == {INDEX_SENTINEL}) | "
                     f"(({t} != {t}) & ({a} == {a})))  # strictly better (or the first NaN): earlier index kept")
            ctx.emit(f"{a} = tl.where({t}_take, {t}, {a})")
            ctx.emit(f"{a}_index = tl.where({t}_take, {self.bcast_n('offs_n')}, {a}_index)")
        elif kind == "lse":
            ctx.emit(f"{t} = tl.where(mask, {src}, {INF})")
            ctx.emit(f"{t}_max = tl.maximum({out[0]}, tl.max({t}, axis={ax}))")
            ctx.emit(f"{t}_shift = tl.where({t}_max == {INF}, 0.0, {t}_max)  # rows with nothing yet stay finite")
            ctx.emit(f"{out[1]} = {out[1]} * tl.exp({out[0]} - {t}_shift) + "
                     f"tl.sum(tl.exp({t} - {self.bcast(t + '_shift')}), axis={ax})")
            ctx.emit(f"{out[0]} = {t}_max")
        elif kind == "welford":
            seen = "start" if self.lo == "0" else f"(start - {self.lo})"
            ctx.emit(f"{t}_n = tl.minimum({self.hi} - start, BLOCK_N) * 1.0  # elements of this chunk, per row")
            ctx.emit(f"{t}_seen = {seen} * 1.0  # elements merged so far (every earlier chunk was full)")
            ctx.emit(f"{t}_mean = tl.sum(tl.where(mask, {src}, 0.0), axis={ax}) / {t}_n")
            ctx.emit(f"{t} = tl.where(mask, {src} - {self.bcast(t + '_mean')}, 0.0)")
            ctx.emit(f"{t}_delta = {t}_mean - {out[0]}")
            ctx.emit(f"{out[0]} = {out[0]} + {t}_delta * ({t}_n / ({t}_seen + {t}_n))")
            ctx.emit(f"{out[1]} = {out[1]} + tl.sum({t} * {t}, axis={ax}) + "
                     f"{t}_delta * {t}_delta * ({t}_seen * {t}_n / ({t}_seen + {t}_n))")
        else:
            raise AssertionError(kind)

    def reduce_finish(self, op: Op) -> None:
        ax, a, t, out, kind = self.axis, f"acc_{op.name}", f"t_{op.name}", [f"s_{v}" for v in op.results], op.reduce
        emit = self.vec.emit
        if kind == "sum":
            emit(f"{out[0]} = tl.sum({a}, axis={ax})")
        elif kind in ("max", "min", "argmax", "argmin"):
            fn = "tl.max" if kind.endswith("max") else "tl.min"
            emit(f"{t}_nan = tl.max(({a} != {a}).to(tl.int32), axis={ax}) > 0  # NaN wins, as in PyTorch")
            emit(f"{out[0]} = tl.where({t}_nan, {NAN}, {fn}({a}, axis={ax}))")
            if kind.startswith("arg"):
                emit(f"{t}_hit = ({a}_index != {INDEX_SENTINEL}) & (({a} == {self.bcast(out[0])}) | "
                     f"(({a} != {a}) & {self.bcast(t + '_nan')}))")
                emit(f"{out[1]} = tl.min(tl.where({t}_hit, {a}_index, {INDEX_SENTINEL}), axis={ax}).to(tl.int64)"
                     "  # the first index of the extremum")
        self.define(op)

    def define(self, op: Op) -> None:
        for i, v in enumerate(op.results):
            index = op.reduce in ("argmax", "argmin") and i == 1
            self.vec.env[v] = expr.Value(f"s_{v}", torch.int64 if index else torch.float32)

    # -- the kernel body ----------------------------------------------------------------------------------------
    def chunk_lines(self, start: str) -> list[str]:
        first = f"{start} + tl.arange(0, BLOCK_N)" if start != "0" else "tl.arange(0, BLOCK_N)"
        lines = [f"offs_n = {first}", f"mask_n = offs_n < {self.hi}"]
        if self.strided:
            lines += ["mask = mask_n[:, None] & mask_i[None, :]",
                      "if IDX64:",
                      "    offs = base[None, :] + offs_n[:, None].to(tl.int64) * n_inner",
                      "else:",
                      "    offs = base[None, :] + offs_n[:, None] * n_inner"]
        else:
            lines += ["mask = mask_m[:, None] & mask_n[None, :]", "offs = row_start[:, None] + offs_n[None, :]"]
        return lines

    def preamble(self) -> list[str]:
        if self.part == "combine":
            where = []
            if any(op.kind == "gather" for op in self.spec.ops):  # gathers address the input row by row
                where = ["base = (offs_q // n_inner) * (n_red * n_inner) + offs_q % n_inner"] if self.strided \
                    else ["row_start = offs_q * n_red"]
            return ["pid = tl.program_id(0)",
                    "offs_q = pid * BLOCK_M + tl.arange(0, BLOCK_M)  # outputs",
                    "mask_q = offs_q < n_q",
                    "if IDX64:",
                    "    offs_q = offs_q.to(tl.int64)",
                    *where,
                    "offs_s = tl.arange(0, BLOCK_S)  # the shares of each row",
                    "mask_s = offs_s < n_split",
                    "mask_p = mask_s[:, None] & mask_q[None, :]",
                    "at = offs_s[:, None] * n_q + offs_q[None, :]  # partial results, [share, output]"]
        lines = self._preamble()
        if self.part == "partial":
            lines += ["split = tl.program_id(1)  # this program's share of the reduced range",
                      "lo = split * per_split",
                      "hi = tl.minimum(lo + per_split, n_red)"]
        return lines

    def _preamble(self) -> list[str]:
        if self.strided:
            return ["pid = tl.program_id(0)",
                    "n_blocks = tl.cdiv(n_inner, BLOCK_M)",
                    "outer = pid // n_blocks",
                    "offs_i = (pid % n_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)  # inner (contiguous) index",
                    "mask_i = offs_i < n_inner",
                    "if IDX64:",
                    "    outer = outer.to(tl.int64)",
                    "offs_q = outer * n_inner + offs_i  # output index",
                    "base = outer * n_red * n_inner + offs_i  # first reduced element of each output"]
        return ["pid = tl.program_id(0)",
                "offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)  # rows",
                "mask_m = offs_m < n_out",
                "if IDX64:",
                "    offs_m = offs_m.to(tl.int64)",
                "row_start = offs_m * n_red"]

    def body(self) -> list[str]:
        spec, group = self.spec, self.group
        reduces = [op for op in spec.ops if op.kind == "reduce"]
        full_outputs = [o for o in group.outputs if spec.level(o) == FULL]
        vec_outputs = [o for o in group.outputs if spec.level(o) != FULL]
        n_reduce_passes = 1 + max(self.phase(op.deps[0]) for op in reduces)
        n_passes = max([n_reduce_passes] + [self.phase(o) + 1 for o in full_outputs])
        vec_ops = [op for op in spec.ops if op.level == VEC and op.kind != "reduce"]
        tile: _Ctx | None = None
        if self.single:
            tile = _Ctx("tile", "v", self.lines, "    ")
            self.vec.emit("# the whole row is in registers: every pass works on the same tile")
            for line in self.chunk_lines("0"):
                tile.emit(line)
        for p in range(n_passes):
            for op in vec_ops:
                if self.phase(op.name) <= p and op.name not in self.vec.env:
                    self.need(op.name, self.vec)
            pass_reduces = [op for op in reduces if self.phase(op.deps[0]) == p]
            stores = [o for o in full_outputs if self.phase(o) == p]
            what = [op.about for op in pass_reduces] + (["write " + ", ".join(stores)] if stores else [])
            self.vec.emit(f"# pass {p + 1} of {n_passes}: {'; '.join(what)}")
            if self.single:
                assert tile is not None
                for op in pass_reduces:
                    self.reduce_direct(op, tile)
                for o in stores:
                    self.store_full(o, tile)
                continue
            for op in pass_reduces:
                for line in self.reduce_init(op):
                    self.vec.emit(line)
            self.vec.emit("for start in range(0, n_red, BLOCK_N):")
            loop = _Ctx("tile", "v", self.lines, "        ")
            for line in self.chunk_lines("start"):
                loop.emit(line)
            for op in pass_reduces:
                self.reduce_update(op, loop)
            for o in stores:
                self.store_full(o, loop)
            for op in pass_reduces:
                self.reduce_finish(op) if op.reduce not in ("lse", "welford") else self.define(op)
        return self.finish(vec_ops, vec_outputs)

    def finish(self, vec_ops: list[Op], vec_outputs: list[str]) -> list[str]:
        for op in vec_ops:
            if op.name not in self.vec.env:
                self.need(op.name, self.vec)
        for o in vec_outputs:
            value = self.need(o, self.vec)
            dtype = expr.TL_DTYPE[self.graph.info(o).dtype]
            self.vec.emit(f"tl.store(out_{o} + {self.q}, {value.expr}.to({dtype}), mask={self.qmask})")
        return self.preamble_lines() + self.lines_top + self.lines

    # -- strategy split: partial results per share of a row, then a combining kernel ----------------------------
    def workspace(self) -> list[tuple[str, torch.dtype]]:
        """The partial results the partial kernel writes: (value, dtype), one [n_split, n_q] buffer each."""
        return [(v, torch.int64 if op.reduce in ("argmax", "argmin") and i == 1 else torch.float32)
                for op in self.spec.ops if op.kind == "reduce" for i, v in enumerate(op.results)]

    def body_partial(self) -> list[str]:
        reduces = [op for op in self.spec.ops if op.kind == "reduce"]
        self.vec.emit(f"# {'; '.join(op.about for op in reduces)}, over this program's share of each row")
        for op in reduces:
            for line in self.reduce_init(op):
                self.vec.emit(line)
        self.vec.emit(f"for start in range({self.lo}, {self.hi}, BLOCK_N):")
        loop = _Ctx("tile", "v", self.lines, "        ")
        for line in self.chunk_lines("start"):
            loop.emit(line)
        for op in reduces:
            self.reduce_update(op, loop)
        for op in reduces:
            self.reduce_finish(op) if op.reduce not in ("lse", "welford") else self.define(op)
        for v, _ in self.workspace():
            self.vec.emit(f"tl.store(ws_{v} + split * n_q + {self.q}, s_{v}, mask={self.qmask})")
        return self.preamble_lines() + self.lines_top + self.lines

    def body_combine(self) -> list[str]:
        emit = self.vec.emit
        for op in (op for op in self.spec.ops if op.kind == "reduce"):
            out, t, kind = [f"s_{v}" for v in op.results], f"t_{op.name}", op.reduce
            parts = [f"p_{v}" for v in op.results]
            emit(f"# {op.about}: merge the shares")
            if kind == "sum":
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other=0.0)")
                emit(f"{out[0]} = tl.sum({parts[0]}, axis=0)")
            elif kind in ("max", "min", "argmax", "argmin"):
                big = INF if kind.endswith("max") else INF[1:]
                fn = "tl.max" if kind.endswith("max") else "tl.min"
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other={big})")
                emit(f"{t}_nan = tl.max(({parts[0]} != {parts[0]}).to(tl.int32), axis=0) > 0")
                emit(f"{out[0]} = tl.where({t}_nan, {NAN}, {fn}({parts[0]}, axis=0))")
                if kind.startswith("arg"):
                    emit(f"{parts[1]} = tl.load(ws_{op.results[1]} + at, mask=mask_p, other={INDEX_SENTINEL})")
                    emit(f"{t}_hit = ({parts[1]} != {INDEX_SENTINEL}) & (({parts[0]} == {out[0]}[None, :]) | "
                         f"(({parts[0]} != {parts[0]}) & {t}_nan[None, :]))")
                    emit(f"{out[1]} = tl.min(tl.where({t}_hit, {parts[1]}, {INDEX_SENTINEL}), axis=0)"
                         "  # earlier shares hold earlier indices")
            elif kind == "lse":
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other={INF})")
                emit(f"{parts[1]} = tl.load(ws_{op.results[1]} + at, mask=mask_p, other=0.0)")
                emit(f"{out[0]} = tl.max({parts[0]}, axis=0)")
                emit(f"{t}_shift = tl.where({out[0]} == {INF}, 0.0, {out[0]})")
                emit(f"{out[1]} = tl.sum({parts[1]} * tl.exp({parts[0]} - {t}_shift[None, :]), axis=0)")
            elif kind == "welford":
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other=0.0)")
                emit(f"{parts[1]} = tl.load(ws_{op.results[1]} + at, mask=mask_p, other=0.0)")
                emit(f"{t}_n = tl.minimum(tl.maximum(n_red - offs_s * per_split, 0), per_split) * 1.0"
                     "  # elements in each share")
                emit(f"{out[0]} = tl.sum({t}_n[:, None] * {parts[0]}, axis=0) / n_red")
                emit(f"{t}_d = {parts[0]} - {out[0]}[None, :]")
                emit(f"{out[1]} = tl.sum({parts[1]} + {t}_n[:, None] * {t}_d * {t}_d, axis=0)  # Chan et al.")
            self.define(op)
        vec_ops = [op for op in self.spec.ops if op.level == VEC and op.kind != "reduce"]
        return self.finish(vec_ops, list(self.group.outputs))

    def preamble_lines(self) -> list[str]:
        return ["    " + line for line in self.preamble()]

    def store_full(self, name: str, ctx: _Ctx) -> None:
        value = self.need(name, ctx)
        dtype = expr.TL_DTYPE[self.graph.info(name).dtype]
        ctx.emit(f"tl.store(out_{name} + offs, {value.expr}.to({dtype}), mask=mask)")


# ---------------------------------------------------------------------------------------------------------------
# The family
# ---------------------------------------------------------------------------------------------------------------
def _pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def _warps(elements: int, lo: int = 1, hi: int = 16) -> int:
    """About 16 fp32 values a thread: enough bytes in flight without spilling (a lead, not yet measured)."""
    return max(lo, min(hi, _pow2(max(elements // 512, 1))))


class ReductionFamily:
    name = NAME

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str]) -> Group | None:
        if node.name in claimed or node.op not in ANCHORS:
            return None
        anchor = ANCHORS[node.op](graph, node)
        if anchor is None or any(m in claimed for m in anchor.members):
            return None
        layout = anchor.layout
        if math.prod(layout.shape) == 0:
            return None
        spec = Spec(layout=layout, anchor=node.name)
        outside = {d for op in anchor.ops for d in op.deps} - {n for op in anchor.ops for n in op.results or (op.name,)}
        if not all(_operand_ok(graph, layout, v, FULL) for v in outside if not any(
                op.kind == "load" and op.deps[0] == v for op in anchor.ops)):
            return None
        spec.add(anchor.ops, anchor.members)
        _Grower(graph, spec, claimed).grow()
        group = make_group(graph, NAME, spec.members, anchor=node.name, spec=spec)
        if not _validate(graph, spec, group):
            return None
        try:  # every configuration must render; a gap found here leaves the nodes to PyTorch, not a crash
            for config in self.space(graph, group, "sm_90a"):
                self.render(graph, group, config, "probe")
        except (AssertionError, KeyError, expr.Unsupported):
            return None
        return group

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Reductions accumulate in fp32 whatever the policy allows: the policy changes nothing here.
        spec: Spec = group.detail["spec"]
        max_warps = max(1, min(32, arch_spec(arch).max_threads_per_block // 32))
        _, n_red, n_inner = spec.layout.sizes()
        p = _pow2(n_red)
        configs: list[dict[str, Any]] = []

        def add(strategy: str, warps: int, **sizes: int | None) -> None:
            config = {"strategy": strategy, **sizes, "num_warps": max(1, min(warps, max_warps))}
            if config not in configs:
                configs.append(config)

        if spec.layout.kind == "strided":
            # Outputs along the contiguous inner dim (64 fp32 = 256 B per reduced index, coalesced); the chunk of
            # the reduced dim fills the tile.
            bm = min(_pow2(n_inner), 64)
            chunk = min(max(4096 // bm, 1), max(p // 4, 1))
            if p * bm <= 8192:
                add("single", _warps(p * bm, 1, 8), block_m=bm, block_n=None)
            add("loop", _warps(bm * chunk, 1, 8), block_m=bm, block_n=chunk)
            add("loop", _warps(min(bm, 32) * chunk * 2, 1, 8), block_m=min(bm, 32), block_n=chunk * 2)
            add("loop", _warps(min(bm * 2, 128) * chunk, 1, 8), block_m=min(bm * 2, 128), block_n=chunk)
            return self._with_split(graph, group, configs)

        # Rows: whole in registers when they fit (short rows pack several per program: `tile` elements), else
        # walked in chunks. The second entry is always the other strategy.
        # A loop chunk is at most 4096 elements (a quarter row for shorter rows); short rows pack into a
        # 1024-element tile.
        chunk = min(4096, max(16, p // 4))
        tile = max(p, 4096)
        if p <= SINGLE_MAX:
            add("single", _warps(tile), tile=tile, block_n=None)
            add("loop", _warps(max(chunk, 1024), 1, 8), tile=max(chunk, 1024), block_n=chunk)
            add("single", _warps(tile) * 2, tile=tile, block_n=None)
            add("single", max(_warps(tile) // 2, tile // (32 * 64)), tile=tile, block_n=None)
            add("loop", _warps(max(chunk * 2, 1024), 1, 16), tile=max(chunk * 2, 1024), block_n=chunk * 2)
        else:
            add("loop", 8, tile=4096, block_n=4096)
            if p <= 2 * SINGLE_MAX and spec.layout.kind != "group":
                # a lead: 32 values a thread over 1024 threads (GroupNorm's per-element channel index spills here)
                add("single", 32, tile=p, block_n=None)
            add("loop", 4, tile=2048, block_n=2048)
            add("loop", 16, tile=8192, block_n=8192)
        return self._with_split(graph, group, configs)

    def _with_split(self, graph: ProblemGraph, group: Group, configs: list[dict[str, Any]]) -> list[Config]:
        """Add strategy split where it applies (one pass, per-row outputs only): first when the other strategies
        would leave the H200's 132 SMs idle (fewer than two programs each) over long rows, else third while it
        would still raise the number of programs. A lead from the SM count, not yet timed."""
        spec: Spec = group.detail["spec"]
        writer = _Writer(graph, group, spec, {"strategy": "loop"})
        if any(writer.phase(op.deps[0]) for op in spec.ops if op.kind == "reduce") or \
                any(spec.level(o) == FULL for o in group.outputs):
            return configs
        loop = next(c for c in configs if c["strategy"] == "loop")
        n_outer, n_red, n_inner = spec.layout.sizes()
        block_n = min(loop["block_n"], _pow2(n_red))
        if spec.layout.kind == "strided":
            programs = n_outer * -(-n_inner // min(loop["block_m"], _pow2(n_inner)))
        else:
            programs = -(-n_outer // max(loop["tile"] // block_n, 1))
        split = {**loop, "strategy": "split", "programs": SPLIT_PROGRAMS}
        if programs < 2 * 132 and n_red >= 4 * block_n:
            return [split, *configs]
        if programs < SPLIT_PROGRAMS:
            return [*configs[:2], split, *configs[2:]]
        return configs

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        spec: Spec = group.detail["spec"]
        layout = spec.layout
        split = config["strategy"] == "split"
        sizes = ["n_inner", "n_red"] if layout.kind == "strided" else ["n_out", "n_red"]
        lines: list[str] = []
        writers = []
        if split:
            partial = _Writer(graph, group, spec, config, "partial")
            lines += _kernel(f"{ident}_partial_kernel", graph, group, partial, partial.body_partial(),
                             [*sizes, "n_q", "per_split"], "BLOCK_N")
            workspace = partial.workspace()
            combine = _Writer(graph, group, spec, config, "combine")
            lines += ["", ""] + _kernel(f"{ident}_kernel", graph, group, combine, combine.body_combine(),
                                        [*sizes, "n_q", "n_split", "per_split"], "BLOCK_S", workspace=workspace)
            writers = [partial, combine]
        else:
            whole = _Writer(graph, group, spec, config)
            lines += _kernel(f"{ident}_kernel", graph, group, whole, whole.body(), sizes, "BLOCK_N")
            writers = [whole]

        primary = next(v for v in group.inputs
                       if tuple(graph.info(v).shape) == layout.shape and FULL in spec.uses(v))
        ops = ", ".join(dict.fromkeys(graph.node(n).op for n in group.nodes if graph.node(n).op != "getitem"))
        strategy = {"single": "whole rows in registers", "loop": "rows walked in chunks, one loop per pass",
                    "split": "each row split into shares reduced by separate programs, then merged"}
        lines += ["", "", f"def {ident}({', '.join(group.inputs)}):",
                  f'    """{ops}: {_describe(layout)}; {strategy[config["strategy"]]}."""']
        for v in group.inputs:
            classes = {full_class(layout, graph.info(v).shape) if u == FULL else
                       vec_class(layout, graph.info(v).shape) if u == VEC else "channel" for u in spec.uses(v)}
            if classes - {"scalar", "strided"} or not classes:
                lines.append(f"    {v} = {v}.contiguous()")
        lines.append(f"    shape = {primary}.shape")
        lines += ["    " + line for line in _size_lines(layout)]
        device = f"{primary}.device"
        for o in group.outputs:
            dtype = graph.info(o).dtype
            shape = "shape" if spec.level(o) == FULL else _vec_shape_code(layout, tuple(graph.info(o).shape))
            lines.append(f"    out_{o} = torch.empty({shape}, dtype={dtype}, device={device})")
        outs = ", ".join(f"out_{o}" for o in group.outputs)
        lines.append(f"    if {'n_outer * n_inner' if layout.kind == 'strided' else 'n_out'} == 0:")
        lines.append(f"        return ({outs},)")
        lines += ["    " + line for line in _block_lines(layout, config)]
        index64 = f"IDX64={primary}.numel() >= 2**31"

        def launch_args(writer: _Writer, extra: list[str]) -> list[str]:
            args = list(group.inputs)
            if split:
                args += [f"ws_{v}" for v, _ in workspace]
            if writer.part != "partial":
                args += [f"out_{o}" for o in group.outputs]
            args += sizes + extra
            if writer.channel_loads:
                args += ["shape[1] // " + str(layout.groups), "math.prod(shape[2:])"]
            if writer.strided_inputs:
                args.append("*shape")
                args += [f"*{v}.expand(shape).stride()" for v in writer.strided_inputs]
            return args

        if split:
            n_q = "n_outer * n_inner" if layout.kind == "strided" else "n_out"
            lines += [f"    n_q = {n_q}",
                      f"    # Shares of each row, so that about {config['programs']} programs run (a lead, not yet "
                      "measured); chunks never straddle two shares.",
                      f"    n_split = max(1, min({config['programs']} // grid[0], triton.cdiv(n_red, BLOCK_N)))",
                      "    per_split = triton.cdiv(triton.cdiv(n_red, n_split), BLOCK_N) * BLOCK_N",
                      "    n_split = triton.cdiv(n_red, per_split)"]
            for v, dtype in workspace:
                lines.append(f"    ws_{v} = torch.empty((n_split, n_q), dtype={dtype}, device={device})")
            args = launch_args(writers[0], ["n_q", "per_split"])
            lines.append(f"    {ident}_partial_kernel[(grid[0], n_split)]({', '.join(args)}, BLOCK_M=BLOCK_M, "
                         f"BLOCK_N=BLOCK_N, {index64}, num_warps={config['num_warps']})")
            lines += ["    BLOCK_S = triton.next_power_of_2(n_split)",
                      "    BLOCK_Q = min(max(1024 // BLOCK_S, 1), triton.next_power_of_2(n_q))"]
            args = launch_args(writers[1], ["n_q", "n_split", "per_split"])
            lines.append(f"    {ident}_kernel[(triton.cdiv(n_q, BLOCK_Q),)]({', '.join(args)}, BLOCK_M=BLOCK_Q, "
                         f"BLOCK_S=BLOCK_S, {index64}, num_warps=4)")
        else:
            args = launch_args(writers[0], [])
            lines.append(f"    {ident}_kernel[grid]({', '.join(args)}, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, "
                         f"{index64}, num_warps={config['num_warps']})")
        lines.append(f"    return ({outs},)")
        return Rendered(source="\n".join(lines), launcher=ident,
                        notes=(f"{NAME}: {_describe(layout)}, {config['strategy']}",))


def _kernel(name: str, graph: ProblemGraph, group: Group, writer: _Writer, body: list[str], sizes: list[str],
            block: str, *, workspace: Sequence[tuple[str, torch.dtype]] = ()) -> list[str]:
    """A kernel's source: its signature (pointers, sizes, the addressing a body asked for) and ``body``."""
    layout = writer.layout
    params = [f"in_{v}" for v in group.inputs]
    if writer.part == "partial":
        params += [f"ws_{v}" for v, _ in writer.workspace()]
    else:
        params += [f"ws_{v}" for v, _ in workspace] + [f"out_{o}" for o in group.outputs]
    params += sizes
    if writer.channel_loads:
        params += ["cpg", "hw"]
    if writer.strided_inputs:
        params += [f"size_{d}" for d in range(layout.rank)]
        for v in writer.strided_inputs:
            params += [f"stride_{v}_{d}" for d in range(layout.rank)]
    return ["@triton.jit",
            f"def {name}({', '.join(params)}, BLOCK_M: tl.constexpr, {block}: tl.constexpr, IDX64: tl.constexpr):",
            *body]


def _describe(layout: Layout) -> str:
    if layout.kind == "group":
        return f"statistics over each of {layout.groups} channel groups"
    dims = list(range(layout.start, layout.stop))
    where = "contiguous rows" if layout.kind == "row" else "a strided dim, coalesced along the inner dims"
    return f"reduces dim{'s' if len(dims) > 1 else ''} {', '.join(map(str, dims))} ({where})"


def _size_lines(layout: Layout) -> list[str]:
    if layout.kind == "group":
        return [f"n_out = shape[0] * {layout.groups}  # one row per (sample, group)",
                "n_red = math.prod(shape) // max(n_out, 1)"]
    s, e = layout.start, layout.stop
    if layout.kind == "row":
        return [f"n_out = math.prod(shape[:{s}])", f"n_red = math.prod(shape[{s}:])"]
    return [f"n_outer = math.prod(shape[:{s}])", f"n_red = math.prod(shape[{s}:{e}])",
            f"n_inner = math.prod(shape[{e}:])"]


def _vec_shape_code(layout: Layout, shape: tuple[int, ...]) -> str:
    if layout.kind == "group":
        return f"(shape[0], {layout.groups})"
    s, e = layout.start, layout.stop
    if shape == layout.keep_shape:
        parts = [f"*shape[:{s}]"] + ["1"] * (e - s) + [f"*shape[{e}:]"]
    else:
        parts = [f"*shape[:{s}]", f"*shape[{e}:]"]
    parts = [p for p in parts if p not in (f"*shape[:{0}]", f"*shape[{layout.rank}:]")]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _block_lines(layout: Layout, config: Config) -> list[str]:
    """Tile sizes and the grid (for split: the grid of programs per share)."""
    single = config["strategy"] == "single"
    block_n = "triton.next_power_of_2(n_red)" if single else \
        f"min({config['block_n']}, triton.next_power_of_2(n_red))"
    if layout.kind == "strided":
        return [f"BLOCK_M = min({config['block_m']}, triton.next_power_of_2(n_inner))",
                f"BLOCK_N = {block_n}",
                "grid = (n_outer * triton.cdiv(n_inner, BLOCK_M),)"]
    return [f"BLOCK_N = {block_n}",
            f"BLOCK_M = min(max({config['tile']} // BLOCK_N, 1), triton.next_power_of_2(n_out))  # rows a program",
            "grid = (triton.cdiv(n_out, BLOCK_M),)"]
