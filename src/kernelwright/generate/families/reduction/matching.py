"""The anchors of reduction groups: the reduction operators (sum, mean, amax/amin, max/min, argmax/argmin, softmax,
log-softmax, LayerNorm, GroupNorm, vector norms, var/std) and the operations each one computes."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.generate.families.reduction.model import FULL, VEC, Layout, Op, operand_ok
from kernelwright.generate.graph import Node, ProblemGraph, Ref

FLOAT_INPUTS = (torch.float32, torch.float16, torch.bfloat16)


@dataclass
class Anchor:
    layout: Layout
    ops: list[Op]
    members: list[str]


def _arg(node: Node, index: int, key: str, default: Any) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(key, default)


def _data(graph: ProblemGraph, node: Node, *, integers: bool = False) -> tuple[str, tuple[int, ...]] | None:
    """The reduced tensor and its shape: a floating one (or, with ``integers``, a bool or integer one too)."""
    a = node.args[0] if node.args else None
    if not isinstance(a, Ref) or a.name not in graph.values:
        return None
    info = graph.info(a.name)
    counted = integers and (info.dtype == torch.bool or not info.dtype.is_floating_point)
    if (info.dtype not in FLOAT_INPUTS and not counted) or not info.shape:
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


def _sum_mean(graph: ProblemGraph, node: Node) -> Anchor | None:
    data = _data(graph, node, integers=node.op == "sum")
    dtype = node.kwargs.get("dtype")
    if data is None or (dtype is not None and dtype not in FLOAT_INPUTS and dtype != torch.int64):
        return None
    x, shape = data
    layout = _layout(shape, _arg(node, 1, "dim", None))
    if layout is None:
        return None
    n = node.name
    if node.info is not None and node.info.dtype == torch.int64:
        # A sum of a mask or of integers (a count: cross-entropy's non-ignored targets): exact, in int64.
        return Anchor(layout, [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="isum", deps=(x,),
                                  results=(n,), about="integer sum")], [n])
    if node.info is None or not node.info.dtype.is_floating_point:
        return None
    if node.op == "sum":
        return Anchor(layout, [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="sum", deps=(x,),
                                   results=(n,), about="sum")], [n])
    return Anchor(layout, [
        Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="sum", deps=(x,), results=(f"{n}__sum",),
           about="sum for the mean"),
        Op(name=n, level=VEC, kind="expr", template="{0} / n_red", deps=(f"{n}__sum",)),
    ], [n])


def _extremum(graph: ProblemGraph, node: Node) -> Anchor | None:
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
        return None if layout is None else Anchor(layout, ops, [n])
    if node.op in ("argmax", "argmin"):
        layout = _layout(shape, _arg(node, 1, "dim", None))
        ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce="arg" + kind, deps=(x,),
                  results=(f"{n}__value", n), about=f"arg{kind} (first index on ties)")]
        return None if layout is None else Anchor(layout, ops, [n])
    if node.info is not None:  # max.default / min.default: the extremum of every element
        layout = _layout(shape, None)
        ops = [Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce=kind, deps=(x,), results=(n,), about=kind)]
        return Anchor(layout, ops, [n]) if layout else None
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
    return Anchor(layout, ops, [n, *items.values()])


def _any_all(graph: ProblemGraph, node: Node) -> Anchor | None:
    """any/all over dims (SDPA's written-out guard for fully masked rows): the max/min of ``x != 0`` as 0/1."""
    data = _data(graph, node, integers=True)
    if data is None or node.info is None or node.info.dtype != torch.bool:
        return None
    x, shape = data
    layout = _layout(shape, _arg(node, 1, "dim", None))
    if layout is None:
        return None
    n, kind = node.name, "max" if node.op == "any" else "min"
    return Anchor(layout, [
        Op(name=f"{n}__term", level=FULL, kind="expr", template="({0} != 0).to(tl.float32)", deps=(x,)),
        Op(name=f"{n}__reduce", level=VEC, kind="reduce", reduce=kind, deps=(f"{n}__term",),
           results=(f"{n}__acc",), about=f"{node.op} ({kind} of x != 0)"),
        Op(name=n, level=VEC, kind="expr", template="{0} > 0", deps=(f"{n}__acc",), dtype=torch.bool),
    ], [n])


def _softmax(graph: ProblemGraph, node: Node) -> Anchor | None:
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
    return Anchor(layout, [
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


def _layer_norm(graph: ProblemGraph, node: Node) -> Anchor | None:
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


def _norm_anchor(graph: ProblemGraph, node: Node, layout: Layout, ops: list[Op]) -> Anchor:
    """A norm's anchor: its ops, plus the getitems of its (out, mean, rstd) outputs as aliases."""
    n = node.name
    items = _getitems(graph, node)
    roles = {0: f"{n}__out", 1: f"{n}__mean", 2: f"{n}__rstd"}
    ops = ops + [Op(name=g, level=FULL if i == 0 else VEC, kind="alias", deps=(roles[i],))
                 for i, g in items.items()]
    return Anchor(layout, ops, [n, *items.values()])


def _group_norm(graph: ProblemGraph, node: Node) -> Anchor | None:
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


def _vector_norm(graph: ProblemGraph, node: Node) -> Anchor | None:
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
    return Anchor(layout, ops, [n])


def _variance(graph: ProblemGraph, node: Node) -> Anchor | None:
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
        return Anchor(layout, [*ops[:1], Op(name=n, level=VEC, kind="expr", deps=(m2,), template=ops[1].template)],
                       [n])
    items = _getitems(graph, node)
    if not set(items) <= {0, 1}:
        return None
    roles = {0: var, 1: mean}
    ops += [Op(name=g, level=VEC, kind="alias", deps=(roles[i],)) for i, g in items.items()]
    return Anchor(layout, ops, [n, *items.values()])


ANCHORS = {
    "sum": _sum_mean, "mean": _sum_mean, "amax": _extremum, "amin": _extremum, "max": _extremum, "min": _extremum,
    "argmax": _extremum, "argmin": _extremum, "any": _any_all, "all": _any_all, "_softmax": _softmax,
    "_log_softmax": _softmax,
    "native_layer_norm": _layer_norm, "native_group_norm": _group_norm, "linalg_vector_norm": _vector_norm,
    "var": _variance, "std": _variance, "var_mean": _variance, "std_mean": _variance,
}  # fmt: skip


def match_anchor(graph: ProblemGraph, node: Node, claimed: set[str]) -> Anchor | None:
    """The reduction ``node`` computes, where this family writes it: its layout, ops and member nodes."""
    if node.name in claimed or node.op not in ANCHORS:
        return None
    anchor = ANCHORS[node.op](graph, node)
    if anchor is None or any(m in claimed for m in anchor.members):
        return None
    layout = anchor.layout
    if math.prod(layout.shape) == 0:
        return None
    outside = {d for op in anchor.ops for d in op.deps} - {n for op in anchor.ops for n in op.results or (op.name,)}
    if not all(operand_ok(graph, layout, v, FULL) for v in outside if not any(
            op.kind == "load" and op.deps[0] == v for op in anchor.ops)):
        return None
    return anchor
