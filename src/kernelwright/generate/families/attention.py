"""Family 5 — attention, FlashAttention-2 style: ``softmax(q @ k^T * scale [+ causal mask]) @ v`` in one kernel
that never writes the [L, S] scores.

Two spellings of attention are claimed:

* **written out** — ``bmm`` (QK^T) → scale (``mul``/``div`` by a number) → optional mask → ``_softmax`` over
  the last dim → ``bmm`` with v, with the views, expands, permutes, clones and dtype casts ``torch.matmul`` and
  ``F.scaled_dot_product_attention``'s math decomposition put around them (this is what capture on the CPU shows
  for SDPA too). The mask is accepted only when it is provably the causal one: a subgraph of constants
  (``full``/``arange``/``sub``/comparisons/logical ops/``where``) that, evaluated symbolically, masks exactly the
  keys ``j > i`` (lower-triangular, ``diagonal=0``) — applied with ``where(mask, -inf, s)`` or added as a 0/-inf
  bias. The "fully masked row → 0" fix-up of SDPA's decomposition (``eq``/``any``/``where`` around the softmax)
  is recognised and reproduced.
* **one SDPA operator** — ``scaled_dot_product_attention``, ``_scaled_dot_product_flash_attention`` (+``_for_cpu``),
  ``_efficient_attention``, ``_cudnn_attention``, ``_attention_math``: its arguments decide (``dropout_p`` must be
  0, no GQA, ``attn_mask`` absent or the causal constant, only the output used).

Anything else — arbitrary or input-dependent masks, dropout, softmax over another dim, attention weights returned
too — is left to PyTorch (``claim`` returns None). The q/k/v projections are GEMMs: another family's.

The kernel is one program per (batch × head, ``BLOCK_M`` query rows) looping over ``BLOCK_N`` key blocks with the
online softmax (running max and sum in fp32), ``tl.dot`` for QK^T and PV (fp16/bf16 operands → tensor cores;
fp32 problems → ``input_precision="ieee"``), the scale folded into ``exp2`` with log2(e). Key blocks that every
row of the tile sees in full run without masks; the causal diagonal and the sequence tails run a masked copy of
the loop; key blocks wholly above the diagonal are never visited. Sizes, strides and the head dim are read from
the tensors at run time (q/k/v may be strided views: nothing is copied); the head dim is padded to a power of two
(≥ 16) with masks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
    make_group,
)
from kernelwright.generate.graph import Node, ProblemGraph, Ref
from kernelwright.hardware import arch_spec

NAME = "attention"

LOG2E = 1.4426950408889634

SDPA_OPS = frozenset({
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math",
})  # fmt: skip
SOFTMAX_OPS = frozenset({"_softmax", "softmax", "_safe_softmax"})
_VIEWS = frozenset({"view", "_unsafe_view", "reshape"})
_COPIES = frozenset({"clone", "alias", "detach", "lift_fresh_copy"})
_CASTS = frozenset({"_to_copy", "convert_element_type"})
_HALF = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 128  # the configs below keep a [BLOCK_M, head_dim] fp32 accumulator in registers


# --------------------------------------------------------------------------------------------------------------
# Small graph helpers


def _node(graph: ProblemGraph, name: str) -> Node | None:
    try:
        return graph.node(name)
    except KeyError:
        return None  # a placeholder


def _users(graph: ProblemGraph, name: str) -> list[Node]:
    return graph.consumers(name)


def _sole_user(graph: ProblemGraph, name: str) -> Node | None:
    users = graph.users.get(name, [])
    if len(users) != 1 or name in graph.outputs:
        return None
    return graph.node(users[0])


def _shape(graph: ProblemGraph, name: str) -> tuple[int, ...]:
    return tuple(graph.info(name).shape)


def _number(graph: ProblemGraph, arg: Any) -> float | None:
    """A Python number, or a graph constant holding one number (``scalar_tensor``, a ``full`` of one element)."""
    if isinstance(arg, bool):
        return None
    if isinstance(arg, (int, float)):
        return float(arg)
    if isinstance(arg, Ref):
        node = _node(graph, arg.name)
        if node is not None and node.info is not None and node.info.numel == 1:
            if node.op == "scalar_tensor":
                return _number(graph, node.args[0])
            if node.op == "full":
                return _number(graph, node.args[1])
    return None


def _cast_target(node: Node) -> torch.dtype | None:
    """The floating dtype a value-preserving cast converts to (None: not such a cast)."""
    if node.op == "_to_copy":
        if not set(node.kwargs) <= {"dtype", "memory_format"}:
            return None
        target = node.kwargs.get("dtype")
    elif node.op == "convert_element_type":
        target = node.args[1] if len(node.args) > 1 else None
    else:
        return None
    if target is None:
        return node.info.dtype if node.info is not None else None
    return target if isinstance(target, torch.dtype) and target in (torch.float32, *_HALF) else None


def _operand_dtype(dtypes: Sequence[torch.dtype]) -> torch.dtype | None:
    """The dtype a matmul operand's values are exact in, given the source dtype and the casts on the way: a
    16-bit type wherever one was passed through (an fp16 value widened to fp32 is exact in fp16), else fp32.
    fp16 and bf16 on one path (each rounds what the other keeps) or other types: None."""
    if any(d not in (torch.float32, *_HALF) for d in dtypes):
        return None
    halves = {d for d in dtypes if d in _HALF}
    if len(halves) > 1:
        return None
    return halves.pop() if halves else torch.float32


def _compose(first: Sequence[int], then: Sequence[int]) -> tuple[int, ...]:
    """x.permute(first).permute(then) == x.permute(result)."""
    return tuple(first[i] for i in then)


def _permutation(node: Node, rank: int) -> tuple[int, ...] | None:
    if node.op == "permute":
        dims = [d % rank for d in node.args[1]]
        return tuple(dims) if sorted(dims) == list(range(rank)) else None
    if node.op == "transpose":
        a, b = node.args[1] % rank, node.args[2] % rank
        dims = list(range(rank))
        dims[a], dims[b] = dims[b], dims[a]
        return tuple(dims)
    if node.op == "t" and rank == 2:
        return (1, 0)
    return None


# --------------------------------------------------------------------------------------------------------------
# The mask: a subgraph of constants, evaluated symbolically as a function of the query row i and the key column j


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


def _broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...] | None:
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


class _MaskEvaluator:
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
        node = _node(self.graph, arg.name)
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
            if step != 1:
                return None
            if shape[0] == 1:
                return _const(start, shape)  # a broadcast size-1 dim always reads index 0
            return _affine({0: 1}, start, shape)
        if op in _COPIES or op in _CASTS:
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
        if op in _VIEWS or op == "expand":
            x = self.value(args[0])
            if x is None:
                return None
            old = x.shape
            if op == "expand":
                if _broadcast_shape(old, shape) != shape:
                    return None
            else:
                strip_old = tuple(s for i, s in enumerate(old) if any(t != 1 for t in old[:i + 1]))
                strip_new = tuple(s for i, s in enumerate(shape) if any(t != 1 for t in shape[:i + 1]))
                if strip_old != strip_new:
                    return None  # only leading 1s may come or go
            return _remap(x, shape, lambda n: n if n < len(old) else None)
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


def _masked_keys(mask: _Sym, scores: Sequence[int], test: Callable[[Any], bool]) -> str | None:
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


def _is_neg_inf(graph: ProblemGraph, arg: Any) -> bool:
    value = _number(graph, arg)
    return value is not None and value == -math.inf


# --------------------------------------------------------------------------------------------------------------
# Claiming


@dataclass
class _Operand:
    source: str  # the value the kernel reads
    perm: tuple[int, ...]  # source.permute(perm) is [*batch, rows, cols] (k: [*batch, S, D] once transposed)
    dtype: torch.dtype  # the dtype tl.dot takes it in
    scale: float = 1.0
    members: list[str] = field(default_factory=list)


def _trace_operand(graph: ProblemGraph, value: str, batch: tuple[int, ...], rows: int, cols: int,
                   *, scalable: bool) -> _Operand | None:
    """Walk back from a bmm operand [G, rows, cols] through the merge view and batch expand of ``torch.matmul``,
    copies, dtype casts, permutes and (``scalable``) multiplications by a number, to the value the kernel reads."""
    members: list[str] = []
    cur = value
    node = _node(graph, cur)
    full = (*batch, rows, cols)
    if len(batch) > 1:
        if node is None or node.op not in _VIEWS or _shape(graph, node.args[0].name) != full:
            return None
        members.append(cur)
        cur = node.args[0].name
    # Copies may sit between the merge view and the expand (contiguous() before the view).
    expanded = False
    perm: tuple[int, ...] = tuple(range(len(full)))
    scale = 1.0
    dtypes: list[torch.dtype] = []
    while True:
        node = _node(graph, cur)
        if node is None or node.info is None:
            break
        shape = tuple(node.info.shape)
        if node.op in _COPIES or (node.op in _VIEWS and _shape(graph, node.args[0].name) == shape):
            pass
        elif node.op == "expand" and not expanded:
            inner = _shape(graph, node.args[0].name)
            if shape != full or inner[-2:] != (rows, cols) or not broadcastable(inner, full):
                break
            expanded = True
            perm = tuple(range(len(inner)))
        elif node.op == "expand" and _shape(graph, node.args[0].name) == shape:
            pass
        elif node.op in _CASTS:
            target = _cast_target(node)
            if target is None:
                break
            dtypes.append(target)
        elif node.op in ("permute", "transpose", "t"):
            dims = _permutation(node, len(shape))
            if dims is None:
                break
            expanded = True  # the batch is now fixed by the permuted tensor's leading dims
            perm = _compose(dims, perm)
        elif scalable and node.op in ("mul", "div") and len(node.args) == 2:
            a, b = node.args
            number, other = _number(graph, b), a
            if number is None and node.op == "mul":
                number, other = _number(graph, a), b
            if number is None or not isinstance(other, Ref) or not math.isfinite(number) or number == 0:
                break
            if _shape(graph, other.name) != shape:
                break
            scale *= number if node.op == "mul" else 1.0 / number
            members.append(cur)
            cur = other.name
            continue
        else:
            break
        members.append(cur)
        cur = node.args[0].name
    info = graph.values.get(cur)
    if info is None:
        return None
    shape = _shape(graph, cur)
    if len(perm) != len(shape):
        return None
    permuted = tuple(shape[p] for p in perm)
    if permuted[-2:] != (rows, cols) or not broadcastable(permuted[:-2], batch):
        return None
    dtype = _operand_dtype([info.dtype, *dtypes])
    if dtype is None:
        return None
    return _Operand(source=cur, perm=perm, dtype=dtype, scale=scale, members=members)


def _fixup_where(graph: ProblemGraph, softmax: Node, scores: str) -> tuple[Node, list[str]] | None:
    """SDPA's decomposition zeroes rows whose scores are all -inf:
    ``where(~any(~(scores == -inf), -1, keepdim), full_like(p, 0), p)``. The where node and the pattern's nodes."""
    users = _users(graph, softmax.name)
    where = [u for u in users if u.op == "where"]
    if len(where) != 1 or len(users) > 2:
        return None
    w = where[0]
    cond, zeros, p = (a for a in w.args[:3])
    if not (isinstance(p, Ref) and p.name == softmax.name and isinstance(cond, Ref) and isinstance(zeros, Ref)):
        return None
    zero_node = _node(graph, zeros.name)
    if zero_node is None or zero_node.op not in ("full_like", "zeros_like", "full") or \
            (zero_node.op != "zeros_like" and _number(graph, zero_node.args[1]) != 0.0):
        return None
    chain = [w.name, zero_node.name]
    n1 = _node(graph, cond.name)
    if n1 is None or n1.op != "logical_not":
        return None
    n2 = _node(graph, n1.args[0].name)
    if n2 is None or n2.op != "any" or n2.args[1] not in (-1, len(n2.info.shape) - 1, [-1]):
        return None
    n3 = _node(graph, n2.args[0].name)
    if n3 is None or n3.op != "logical_not":
        return None
    n4 = _node(graph, n3.args[0].name)
    if n4 is None or n4.op != "eq" or n4.args[0] != Ref(scores) or not _is_neg_inf(graph, n4.args[1]):
        return None
    chain += [n1.name, n2.name, n3.name, n4.name]
    return w, chain


@dataclass
class _Core:
    """What a claim found; becomes the group's detail."""

    q: _Operand
    k: _Operand
    v: _Operand
    batch: tuple[int, ...]
    causal: bool
    scale: float  # the product of every scale factor met
    zero_empty_rows: bool
    core_out: str  # the attention's output value, [*batch, L, Dv]
    core_dtype: torch.dtype
    members: list[str]
    constants: list[str]  # constant nodes (mask, numbers): left outside when something else uses them


def _explicit(graph: ProblemGraph, bmm1: Node) -> _Core | None:  # noqa: C901 - one pattern, step by step
    """softmax(bmm(q, k^T) * scale [masked]) then bmm with v, as torch.matmul and SDPA's math path write it."""
    if bmm1.info is None or len(bmm1.info.shape) != 3:
        return None
    groups, seq_q, seq_k = bmm1.info.shape
    members = [bmm1.name]
    constants: list[str] = []
    cur = bmm1.name
    batch: tuple[int, ...] = (groups,)
    nxt = _sole_user(graph, cur)
    if nxt is not None and nxt.op in _VIEWS and len(nxt.info.shape) > 3 and \
            tuple(nxt.info.shape[-2:]) == (seq_q, seq_k) and math.prod(nxt.info.shape[:-2]) == groups:
        batch = tuple(nxt.info.shape[:-2])
        if len(batch) > 2:
            return None
        members.append(nxt.name)
        cur = nxt.name
    scores_shape = (*batch, seq_q, seq_k)
    scale = 1.0
    mask_kind = "none"
    softmax = None
    while softmax is None:
        users = _users(graph, cur)
        if cur in graph.outputs or not users:
            return None
        main = [u for u in users if not (u.op == "eq" and _is_neg_inf(graph, u.args[1]))]
        if len(main) != 1 or (len(users) > 1 and main[0].op not in SOFTMAX_OPS):
            return None
        node = main[0]
        if node.info is None or tuple(node.info.shape) != scores_shape:
            return None
        if node.op in SOFTMAX_OPS:
            dim = node.args[1]
            if dim % len(scores_shape) != len(scores_shape) - 1:
                return None
            softmax = node
        elif node.op in ("mul", "div") and len(node.args) == 2:
            if node.args[0] == Ref(cur):
                number = _number(graph, node.args[1])
                const_arg = node.args[1]
            elif node.op == "mul" and node.args[1] == Ref(cur):
                number = _number(graph, node.args[0])
                const_arg = node.args[0]
            else:
                return None
            if number is None or not (math.isfinite(number) and number > 0):
                return None
            scale *= number if node.op == "mul" else 1.0 / number
            if isinstance(const_arg, Ref):
                constants.append(const_arg.name)
        elif node.op in _COPIES or node.op in _VIEWS or node.op == "expand" or \
                (node.op in _CASTS and _cast_target(node) is not None):
            pass  # same shape as the scores (checked above): nothing changes but, perhaps, the rounding
        elif node.op in ("where", "add") and mask_kind == "none":
            evaluator = _MaskEvaluator(graph)
            if node.op == "where":
                cond, a, b = node.args[:3]
                if b == Ref(cur) and _is_neg_inf(graph, a):
                    sym, test = evaluator.value(cond), bool
                elif a == Ref(cur) and _is_neg_inf(graph, b):
                    sym, test = evaluator.value(cond), (lambda x: not x)
                else:
                    return None
                for arg in (a, b):
                    if isinstance(arg, Ref) and arg.name != cur:
                        constants.append(arg.name)
            else:
                if node.kwargs.get("alpha", 1) != 1 or len(node.args) > 2:
                    return None
                other = node.args[1] if node.args[0] == Ref(cur) else node.args[0]
                sym = evaluator.value(other)
                test = _additive_test
            if sym is None:
                return None
            try:
                kind = _masked_keys(sym, scores_shape, test)
            except _NotAMask:
                return None
            if kind is None:
                return None
            mask_kind = kind
            constants.extend(evaluator.nodes)
        else:
            return None
        members.append(node.name)
        cur = node.name

    zero_empty_rows = softmax.op == "_safe_softmax"
    cur = softmax.name
    fixup = _fixup_where(graph, softmax, softmax.args[0].name)
    if fixup is not None:
        where, chain = fixup
        members.extend(chain)
        zero_empty_rows = True
        cur = where.name
    # P: copies and casts, then torch.matmul's expand/merge view, into the second bmm.
    bmm2 = None
    while bmm2 is None:
        node = _sole_user(graph, cur)
        if node is None:
            return None
        if node.op == "bmm":
            if node.args[0] != Ref(cur):
                return None
            bmm2 = node
            break
        if node.op in _COPIES or (node.op in _CASTS and _cast_target(node) is not None) or \
                (node.op == "expand" and tuple(node.info.shape) == scores_shape) or \
                (node.op in _VIEWS and tuple(node.info.shape) in (scores_shape, (groups, seq_q, seq_k))):
            members.append(node.name)
            cur = node.name
            continue
        return None
    if tuple(graph.info(cur).shape) != (groups, seq_q, seq_k):
        return None
    members.append(bmm2.name)
    head_dim_v = bmm2.info.shape[-1]
    head_dim = graph.info(bmm1.args[0].name).shape[-1]
    q = _trace_operand(graph, bmm1.args[0].name, batch, seq_q, head_dim, scalable=True)
    k = _trace_operand(graph, bmm1.args[1].name, batch, head_dim, seq_k, scalable=True)
    v = _trace_operand(graph, bmm2.args[1].name, batch, seq_k, head_dim_v, scalable=False)
    if q is None or k is None or v is None:
        return None
    k.perm = (*k.perm[:-2], k.perm[-1], k.perm[-2])  # the kernel reads k as [*batch, S, D]
    core_out = bmm2.name
    if len(batch) > 1:
        view = _sole_user(graph, bmm2.name)
        if view is None or view.op not in _VIEWS or tuple(view.info.shape) != (*batch, seq_q, head_dim_v):
            return None
        members.append(view.name)
        core_out = view.name
    members += q.members + k.members + v.members
    return _Core(q=q, k=k, v=v, batch=batch, causal=mask_kind == "causal", scale=scale * q.scale * k.scale,
                 zero_empty_rows=zero_empty_rows, core_out=core_out, core_dtype=bmm2.info.dtype,
                 members=members, constants=constants)


class _NotAMask(Exception):  # noqa: N818 - a control-flow signal
    """An additive mask holds something other than 0 and -inf."""


def _additive_test(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _NotAMask
    if value == -math.inf:
        return True
    if value != 0:
        raise _NotAMask
    return False


def _bind(node: Node) -> dict[str, Any] | None:
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    bound: dict[str, Any] = {}
    for i, argument in enumerate(schema.arguments):
        if i < len(node.args):
            bound[argument.name] = node.args[i]
        elif argument.name in node.kwargs:
            bound[argument.name] = node.kwargs[argument.name]
        elif argument.has_default_value():
            bound[argument.name] = argument.default_value
        else:
            bound[argument.name] = None
    return bound


def _sdpa(graph: ProblemGraph, node: Node) -> _Core | None:
    """One scaled_dot_product_attention operator (any backend's aten op), judged by its arguments."""
    bound = _bind(node)
    if bound is None:
        return None
    q, k, v = bound.get("query"), bound.get("key"), bound.get("value")
    if not all(isinstance(x, Ref) for x in (q, k, v)):
        return None
    if float(bound.get("dropout_p") or 0.0) != 0.0 or bound.get("enable_gqa") or bound.get("return_debug_mask") \
            or bound.get("dropout_mask") is not None:
        return None
    q_shape, k_shape, v_shape = (_shape(graph, x.name) for x in (q, k, v))
    if not 3 <= len(q_shape) <= 4 or len(k_shape) != len(q_shape) or len(v_shape) != len(q_shape):
        return None
    batch = _broadcast_shape(q_shape[:-2], k_shape[:-2], v_shape[:-2])
    if batch is None or k_shape[-1] != q_shape[-1] or v_shape[-2] != k_shape[-2]:
        return None
    seq_q, seq_k = q_shape[-2], k_shape[-2]
    constants: list[str] = []
    causal = bool(bound.get("is_causal"))
    mask = bound.get("attn_mask", bound.get("attn_bias"))
    if mask is not None:
        evaluator = _MaskEvaluator(graph)
        sym = evaluator.value(mask)
        if sym is None or causal:
            return None
        is_bool = graph.info(mask.name).dtype == torch.bool
        try:
            kind = _masked_keys(sym, (*batch, seq_q, seq_k), (lambda x: not x) if is_bool else _additive_test)
        except _NotAMask:
            return None
        if kind is None:
            return None
        causal = kind == "causal"
        constants.extend(evaluator.nodes)
    scale = bound.get("scale")
    members = [node.name]
    if node.info is not None:
        core_out = node.name
    else:
        getitems = _users(graph, node.name)
        outs = [g for g in getitems if g.op == "getitem" and g.args[1] == 0]
        if len(outs) != 1 or any(g.op != "getitem" for g in getitems):
            return None
        if any(g.args[1] != 0 and (graph.users.get(g.name) or g.name in graph.outputs) for g in getitems):
            return None
        members += [g.name for g in getitems]
        core_out = outs[0].name
    dtypes = [graph.info(x.name).dtype for x in (q, k, v)]
    if any(_operand_dtype([d]) is None for d in dtypes):
        return None
    identity = tuple(range(len(q_shape)))
    operands = [_Operand(source=x.name, perm=identity, dtype=d) for x, d in zip((q, k, v), dtypes)]
    return _Core(q=operands[0], k=operands[1], v=operands[2], batch=batch, causal=causal,
                 scale=math.nan if scale is None else float(scale), zero_empty_rows=True, core_out=core_out,
                 core_dtype=graph.info(core_out).dtype, members=members, constants=constants)


def _tail(graph: ProblemGraph, core_out: str, claimed: set[str]) -> tuple[list[str], tuple[int, ...] | None, str]:
    """Casts and layout copies after the output (SDPA's decomposition ends in permute → clone → permute to give
    the output the layout the fused kernels return): written by the kernel directly. Returns the absorbed
    nodes, the permutation of [*batch, L, Dv] the output is allocated in, and the group's output value."""
    rank = len(graph.info(core_out).shape)
    absorbed: list[str] = []
    pending: list[str] = []
    perm = tuple(range(rank))
    pending_perm = perm
    cur = core_out
    while True:
        node = _sole_user(graph, cur)
        if node is None or node.name in claimed or node.info is None:
            break
        if node.op in _CASTS and _cast_target(node) is not None:
            absorbed += pending + [node.name]
            pending, perm = [], pending_perm
        elif node.op in ("permute", "transpose"):
            dims = _permutation(node, rank)
            if dims is None:
                break
            pending.append(node.name)
            pending_perm = _compose(pending_perm, dims)
        elif node.op in _COPIES:
            absorbed += pending + [node.name]
            pending, perm = [], pending_perm
        else:
            break
        cur = node.name
    output = absorbed[-1] if absorbed else core_out
    return absorbed, (perm if perm != tuple(range(rank)) else None), output


def _scale_is_head_dim(scale: float, head_dim: int) -> bool:
    """Whether a scale is 1/sqrt(head_dim): written as a constant in the graph, but computed from the head dim
    in the problem (``q.shape[-1] ** -0.5``, SDPA's default), so the kernel recomputes it at run time."""
    return math.isclose(scale, head_dim ** -0.5, rel_tol=1e-6) and head_dim != 1


def _tl(dtype: torch.dtype) -> str:
    return expr.TL_DTYPE[dtype]


class AttentionFamily:
    name = NAME

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str]) -> Group | None:
        if node.name in claimed:
            return None
        if node.op == "bmm":
            core = _explicit(graph, node)
        elif node.op in SDPA_OPS:
            core = _sdpa(graph, node)
        else:
            return None
        if core is None:
            return None
        q_shape = tuple(graph.info(core.q.source).shape[p] for p in core.q.perm)
        v_shape = tuple(graph.info(core.v.source).shape[p] for p in core.v.perm)
        head_dim, head_dim_v = q_shape[-1], v_shape[-1]
        if max(head_dim, head_dim_v) > MAX_HEAD_DIM or len(core.batch) > 2:
            return None
        qk_dtype = core.q.dtype if core.q.dtype == core.k.dtype else torch.float32
        scale = core.scale
        if math.isnan(scale) or _scale_is_head_dim(scale, head_dim):
            scale_detail: float | None = None
        else:
            scale_detail = scale
        tail, out_perm, output = _tail(graph, core.core_out, claimed | set(core.members))
        out_dtype = graph.info(output).dtype
        # P is rounded to v's type for the tensor cores, an error of the order of a 16-bit output's rounding;
        # an fp32 output (even of 16-bit inputs) keeps P and v in fp32.
        v_dtype = core.v.dtype if out_dtype in _HALF else torch.float32
        members = set(core.members) | set(tail)
        constants = set(core.constants) - members
        members |= constants
        # A constant also used outside is left to PyTorch (its value then comes in, unused by the kernel).
        changed = True
        while changed:
            changed = False
            for name in list(constants):
                if name in graph.outputs or any(u not in members for u in graph.users.get(name, [])):
                    members.discard(name)
                    constants.discard(name)
                    changed = True
        if members & claimed:
            return None
        group = make_group(
            graph, NAME, members, anchor=node.name,
            q=core.q.source, k=core.k.source, v=core.v.source,
            q_perm=core.q.perm, k_perm=core.k.perm, v_perm=core.v.perm,
            qk_dtype=qk_dtype, v_dtype=v_dtype,
            batch_rank=len(core.batch), causal=core.causal, scale=scale_detail,
            zero_empty_rows=core.zero_empty_rows, core_dtype=core.core_dtype, out_dtype=out_dtype,
            out_perm=out_perm, head_dim=head_dim, head_dim_v=head_dim_v,
            seq_q=q_shape[-2], seq_k=graph.info(core.k.source).shape[core.k.perm[-2]],
            form="sdpa" if node.op in SDPA_OPS else "explicit",
        )
        if group.outputs != (output,):
            return None  # an intermediate (the scores, the probabilities) is needed elsewhere
        for name in (core.q.source, core.k.source, core.v.source):
            if name not in group.inputs:
                return None
        return group

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        detail = group.detail
        fp32 = torch.float32 in (detail["qk_dtype"], detail["v_dtype"])
        block_d = _block_dim(detail["head_dim"])
        block_dv = _block_dim(detail["head_dim_v"])
        if fp32:
            # No tensor cores for ieee fp32: CUDA-core FMAs, small tiles keep the [BLOCK_M, BLOCK_N] scores and the
            # accumulator in registers. Leads, not measured.
            tiles = [(64, 32, 4, 2), (32, 32, 4, 2), (64, 64, 4, 2), (128, 32, 8, 2), (32, 64, 4, 2)]
            precisions = ["ieee"] * len(tiles)
            if policy.allow_tf32:
                tiles = [(128, 64, 4, 3), (64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 8, 2)] + tiles
                precisions = ["tf32"] * 4 + precisions
            elem = 4
        else:
            if max(block_d, block_dv) <= 64:
                # Triton's FA tutorial on Hopper: 128x64 tiles, 4 warps (one warpgroup), 3 stages for d <= 64.
                tiles = [(128, 64, 4, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 8, 3), (128, 32, 4, 4),
                         (64, 32, 4, 4)]
            else:
                # d = 128: a 128x128 fp32 accumulator needs two warpgroups to stay in registers.
                tiles = [(128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (128, 32, 8, 4), (64, 32, 4, 4)]
            if detail["seq_q"] <= 64:
                tiles.sort(key=lambda t: t[0] != 64)  # short sequences: half of a 128-row tile would idle
            precisions = ["native"] * len(tiles)
            elem = 2
        spec = arch_spec(arch)
        smem_limit = spec.shared_memory_per_block_optin_bytes or spec.shared_memory_per_block_bytes
        max_threads = spec.max_threads_per_block
        configs: list[Config] = []
        for (block_m, block_n, warps, stages), precision in zip(tiles, precisions):
            # Shared memory: q once, k and v per pipeline stage.
            smem = elem * (block_m * block_d + stages * block_n * (block_d + block_dv))
            # fp32 accumulator and scores per thread; past ~128 registers the tile spills.
            regs = (block_m * block_dv + block_m * block_n) // (warps * 32)
            if smem > smem_limit or warps * 32 > max_threads or regs > 128:
                continue
            config = {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": warps, "num_stages": stages}
            if fp32:
                config["input_precision"] = precision
            if config not in configs:
                configs.append(config)
        return configs

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return Rendered(source=_render_source(graph, group, config, ident), launcher=ident,
                        notes=_notes(group))


def _block_dim(size: int) -> int:
    return max(16, 1 << max(0, size - 1).bit_length())


def _notes(group: Group) -> tuple[str, ...]:
    d = group.detail
    notes = [f"attention ({d['form']} form): {'causal' if d['causal'] else 'no mask'}, scale "
             + ("head_dim ** -0.5 at run time" if d["scale"] is None else repr(d["scale"]))]
    if d["zero_empty_rows"]:
        notes.append("rows with every key masked give 0 (as SDPA's math path)")
    return tuple(notes)


# --------------------------------------------------------------------------------------------------------------
# Rendering

_INNER = '''\
@triton.jit
def {ident}_inner(
    acc, l_i, m_i, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd, offs_m, lo, hi, seq_k, qk_scale,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, HEAD_DIM: tl.constexpr,
    HEAD_DIM_V: tl.constexpr, MASKED: tl.constexpr,
):
    """Online softmax over the key blocks [lo, hi). MASKED: the blocks past the sequence's end or on the
    causal diagonal, where some keys must be excluded; the others run without a mask."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_mask = offs_d[:, None] < HEAD_DIM
        v_mask = offs_dv[None, :] < HEAD_DIM_V
        if MASKED:
            k_mask = k_mask & (cols[None, :] < seq_k)
            v_mask = v_mask & (cols[:, None] < seq_k)
        # k^T as [BLOCK_D, BLOCK_N]; masked entries read 0 (the padded head dims add nothing to q.k)
        k = tl.load(K + offs_d[:, None] * stride_kd + cols[None, :] * stride_kn, mask=k_mask, other=0.0){k_cast}
        s = tl.dot(q, k{qk_precision}) * qk_scale  # log2(e) * scale * q.k: softmax in base 2
        if MASKED:
            keep = (cols[None, :] < seq_k){causal_keep}
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row that has seen no unmasked key yet keeps max -inf; subtracting 0 then gives p = 0, not NaN.
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_ref)
        p = tl.exp2(s - m_ref[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + cols[:, None] * stride_vn + offs_dv[None, :] * stride_vd, mask=v_mask, other=0.0){v_cast}
        acc = tl.dot(p.to({p_dtype}), v, acc * alpha[:, None]{pv_precision})
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def {ident}_kernel(
    Q, K, V, Out,
    stride_qz, stride_qh, stride_qm, stride_qd, stride_kz, stride_kh, stride_kn, stride_kd,
    stride_vz, stride_vh, stride_vn, stride_vd, stride_oz, stride_oh, stride_om, stride_od,
    n_heads, seq_q, seq_k, qk_scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
):
    """One program per (batch * head, BLOCK_M query rows): FlashAttention-2's forward pass."""
    n_m_blocks = tl.cdiv(seq_q, BLOCK_M)
    n_zh = tl.num_programs(0) // n_m_blocks
    pid = tl.program_id(0)
    {program_order}
    off_z = off_zh // n_heads
    off_h = off_zh % n_heads
    Q += off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    K += off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    V += off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    Out += off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q_mask = (offs_m[:, None] < seq_q) & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=q_mask, other=0.0){q_cast}
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    {bounds}
    acc, l_i, m_i = {ident}_inner(
        acc, l_i, m_i, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd, offs_m, 0, full_end, seq_k, qk_scale,
        BLOCK_N, BLOCK_D, BLOCK_DV, HEAD_DIM, HEAD_DIM_V, MASKED=False)
    acc, l_i, m_i = {ident}_inner(
        acc, l_i, m_i, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd, offs_m, full_end, hi, seq_k, qk_scale,
        BLOCK_N, BLOCK_D, BLOCK_DV, HEAD_DIM, HEAD_DIM_V, MASKED=True)
    {finish}
    o_mask = (offs_m[:, None] < seq_q) & (offs_dv[None, :] < HEAD_DIM_V)
    tl.store(Out + offs_m[:, None] * stride_om + offs_dv[None, :] * stride_od, {out_value}, mask=o_mask)
'''

_CAUSAL_BOUNDS = """\
# Causal: key blocks below the tile's first row are seen whole by every row; the keys from there to the
    # tile's last row need the mask; blocks above the diagonal are skipped.
    full_end = tl.minimum(start_m * BLOCK_M + 1, seq_k) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, seq_k)"""

_PLAIN_BOUNDS = """\
# Whole key blocks run unmasked; the last, partial one is masked.
    full_end = seq_k // BLOCK_N * BLOCK_N
    hi = seq_k"""


def _precision_arg(dtype: torch.dtype, config: Config) -> str:
    if dtype != torch.float32:
        return ""
    return f', input_precision="{config.get("input_precision", "ieee")}"'


def _render_source(graph: ProblemGraph, group: Group, config: Config, ident: str) -> str:
    d = group.detail
    qk_dtype, v_dtype = d["qk_dtype"], d["v_dtype"]
    sources = {"q": d["q"], "k": d["k"], "v": d["v"]}
    loaded = {name: graph.info(src).dtype for name, src in sources.items()}

    def cast(name: str, target: torch.dtype) -> str:
        return "" if loaded[name] == target else f".to({_tl(target)})"

    causal = d["causal"]
    if causal:
        order = ("# the longest causal rows first, across all heads: fewer idle SMs at the end (a lead, not "
                 "measured)\n    start_m = n_m_blocks - 1 - pid // n_zh\n    off_zh = pid % n_zh")
    else:
        order = ("# the row blocks of one head run side by side, sharing its k and v in L2 (a lead, not "
                 "measured)\n    start_m = pid % n_m_blocks\n    off_zh = pid // n_m_blocks")
    out = "acc / l_i[:, None]"
    finish = f"out = {out}"
    if d["zero_empty_rows"]:
        finish = f"out = tl.where(l_i[:, None] > 0, {out}, 0.0)  # a row with every key masked gives 0"
    out_value = f"out.to({_tl(d['core_dtype'])})"
    if d["out_dtype"] != d["core_dtype"]:
        out_value += f".to({_tl(d['out_dtype'])})"  # rounded as the reference rounds: its dtype, then the cast
    kernels = _INNER.format(
        ident=ident,
        k_cast=cast("k", qk_dtype), v_cast=cast("v", v_dtype), q_cast=cast("q", qk_dtype),
        qk_precision=_precision_arg(qk_dtype, config), pv_precision=_precision_arg(v_dtype, config),
        p_dtype=_tl(v_dtype),
        causal_keep=" & (cols[None, :] <= offs_m[:, None])" if causal else "",
        program_order=order, bounds=_CAUSAL_BOUNDS if causal else _PLAIN_BOUNDS, finish=finish, out_value=out_value,
    )
    return kernels + "\n\n" + _launcher(graph, group, config, ident)


def _launcher(graph: ProblemGraph, group: Group, config: Config, ident: str) -> str:
    d = group.detail
    local_names = {"q_view", "k_view", "v_view", "o_view", "out", "batch", "shape", "seq_q", "seq_k", "head_dim",
                   "head_dim_v", "scale", "grid"}
    params = {v: (v if v not in local_names else f"{v}_in") for v in group.inputs}
    rank = d["batch_rank"] + 2
    identity = tuple(range(rank))
    lines = [f"def {ident}({', '.join(params[v] for v in group.inputs)}):"]
    mask = "causal mask" if d["causal"] else "no mask"
    lines.append(f'    """softmax(q @ k^T * scale, {mask}) @ v, FlashAttention-2 style: the scores never leave '
                 'the chip."""')
    for name, perm_key in (("q", "q_perm"), ("k", "k_perm"), ("v", "v_perm")):
        src = params[d[name]]
        perm = tuple(d[perm_key])
        view = f"{src}.permute{perm}" if perm != tuple(range(len(perm))) else src
        lines.append(f"    {name}_view = {view}")
    lines.append("    batch = torch.broadcast_shapes(q_view.shape[:-2], k_view.shape[:-2], v_view.shape[:-2])")
    lines.append("    q_view, k_view, v_view = (t.expand(*batch, *t.shape[-2:]) for t in (q_view, k_view, v_view))")
    lines.append("    seq_q, head_dim = q_view.shape[-2:]")
    lines.append("    seq_k, head_dim_v = k_view.shape[-2], v_view.shape[-1]")
    out_dtype = d["out_dtype"]
    device = f"{params[d['q']]}.device"
    out_perm = d["out_perm"]
    if out_perm is None or tuple(out_perm) == identity:
        lines.append(f"    out = torch.empty((*batch, seq_q, head_dim_v), dtype={out_dtype}, device={device})")
        lines.append("    o_view = out")
    else:
        inverse = tuple(sorted(range(rank), key=lambda i: out_perm[i]))
        lines.append("    shape = (*batch, seq_q, head_dim_v)")
        lines.append("    # allocated in the layout the reference's output has; the kernel writes through the strides")
        lines.append(f"    out = torch.empty([shape[i] for i in {tuple(out_perm)}], dtype={out_dtype}, "
                     f"device={device})")
        lines.append(f"    o_view = out.permute{inverse}")
    if d["batch_rank"] == 1:
        lines.append("    q_view, k_view, v_view, o_view = (t[None] for t in (q_view, k_view, v_view, o_view))")
    if d["scale"] is None:
        lines.append("    scale = head_dim ** -0.5")
    else:
        lines.append(f"    scale = {d['scale']!r}")
    block_m, block_n = config["BLOCK_M"], config["BLOCK_N"]
    lines.append(f"    grid = (triton.cdiv(seq_q, {block_m}) * q_view.shape[0] * q_view.shape[1],)")
    lines.append(f"    {ident}_kernel[grid](")
    lines.append("        q_view, k_view, v_view, o_view, *q_view.stride(), *k_view.stride(), *v_view.stride(), "
                 "*o_view.stride(),")
    lines.append(f"        q_view.shape[1], seq_q, seq_k, scale * {LOG2E!r},")
    lines.append(f"        BLOCK_M={block_m}, BLOCK_N={block_n}, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),")
    lines.append("        BLOCK_DV=max(16, triton.next_power_of_2(head_dim_v)), HEAD_DIM=head_dim, "
                 "HEAD_DIM_V=head_dim_v,")
    lines.append(f"        num_warps={config['num_warps']}, num_stages={config['num_stages']})")
    lines.append("    return (out,)")
    return "\n".join(lines)
