"""The two spellings of attention a group starts from: written out (``bmm`` → scale → mask → softmax → ``bmm``, with
the glue ``torch.matmul`` and SDPA's math decomposition put around it) and one SDPA operator; what each computes
(:class:`Core`: q, k, v as the kernel reads them, causal or not, the scale)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelwright.generate.families.base import broadcastable, graph_node
from kernelwright.generate.families.symbolic import (
    MaskEvaluator,
    NotAMask,
    additive_test,
    broadcast_shape,
    masked_keys,
)
from kernelwright.generate.graph import Node, ProblemGraph, Ref
from kernelwright.generate.operators import CASTS, COPIES, PERMUTES, RESHAPES

SDPA_OPS = frozenset({
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math",
})  # fmt: skip
SOFTMAX_OPS = frozenset({"_softmax", "softmax", "_safe_softmax"})
HALF = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------------------------------------------
# Small graph helpers


def _users(graph: ProblemGraph, name: str) -> list[Node]:
    return graph.consumers(name)


def sole_user(graph: ProblemGraph, name: str) -> Node | None:
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
        node = graph_node(graph, arg.name)
        if node is not None and node.info is not None and node.info.numel == 1:
            if node.op == "scalar_tensor":
                return _number(graph, node.args[0])
            if node.op == "full":
                return _number(graph, node.args[1])
    return None


def cast_target(node: Node) -> torch.dtype | None:
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
    return target if isinstance(target, torch.dtype) and target in (torch.float32, *HALF) else None


def operand_dtype(dtypes: Sequence[torch.dtype]) -> torch.dtype | None:
    """The dtype a matmul operand's values are exact in, given the source dtype and the casts on the way: a
    16-bit type wherever one was passed through (an fp16 value widened to fp32 is exact in fp16), else fp32.
    fp16 and bf16 on one path (each rounds what the other keeps) or other types: None."""
    if any(d not in (torch.float32, *HALF) for d in dtypes):
        return None
    halves = {d for d in dtypes if d in HALF}
    if len(halves) > 1:
        return None
    return halves.pop() if halves else torch.float32


def compose(first: Sequence[int], then: Sequence[int]) -> tuple[int, ...]:
    """x.permute(first).permute(then) == x.permute(result)."""
    return tuple(first[i] for i in then)


def permutation(node: Node, rank: int) -> tuple[int, ...] | None:
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
    node = graph_node(graph, cur)
    full = (*batch, rows, cols)
    if len(batch) > 1:
        if node is None or node.op not in RESHAPES or _shape(graph, node.args[0].name) != full:
            return None
        members.append(cur)
        cur = node.args[0].name
    # Copies may sit between the merge view and the expand (contiguous() before the view).
    expanded = False
    perm: tuple[int, ...] = tuple(range(len(full)))
    scale = 1.0
    dtypes: list[torch.dtype] = []
    while True:
        node = graph_node(graph, cur)
        if node is None or node.info is None:
            break
        shape = tuple(node.info.shape)
        if node.op in COPIES or (node.op in RESHAPES and _shape(graph, node.args[0].name) == shape):
            pass
        elif node.op == "expand" and not expanded:
            inner = _shape(graph, node.args[0].name)
            if shape != full or inner[-2:] != (rows, cols) or not broadcastable(inner, full):
                break
            expanded = True
            perm = tuple(range(len(inner)))
        elif node.op == "expand" and _shape(graph, node.args[0].name) == shape:
            pass
        elif node.op in CASTS:
            target = cast_target(node)
            if target is None:
                break
            dtypes.append(target)
        elif node.op in PERMUTES:
            dims = permutation(node, len(shape))
            if dims is None:
                break
            expanded = True  # the batch is now fixed by the permuted tensor's leading dims
            perm = compose(dims, perm)
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
    dtype = operand_dtype([info.dtype, *dtypes])
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
    zero_node = graph_node(graph, zeros.name)
    if zero_node is None or zero_node.op not in ("full_like", "zeros_like", "full") or \
            (zero_node.op != "zeros_like" and _number(graph, zero_node.args[1]) != 0.0):
        return None
    chain = [w.name, zero_node.name]
    n1 = graph_node(graph, cond.name)
    if n1 is None or n1.op != "logical_not":
        return None
    n2 = graph_node(graph, n1.args[0].name)
    if n2 is None or n2.op != "any" or n2.args[1] not in (-1, len(n2.info.shape) - 1, [-1]):
        return None
    n3 = graph_node(graph, n2.args[0].name)
    if n3 is None or n3.op != "logical_not":
        return None
    n4 = graph_node(graph, n3.args[0].name)
    if n4 is None or n4.op != "eq" or n4.args[0] != Ref(scores) or not _is_neg_inf(graph, n4.args[1]):
        return None
    chain += [n1.name, n2.name, n3.name, n4.name]
    return w, chain


@dataclass
class Core:
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


def explicit(graph: ProblemGraph, bmm1: Node) -> Core | None:
    """softmax(bmm(q, k^T) * scale [masked]) then bmm with v, as torch.matmul and SDPA's math path write it."""
    if bmm1.info is None or len(bmm1.info.shape) != 3:
        return None
    groups, seq_q, seq_k = bmm1.info.shape
    members = [bmm1.name]
    constants: list[str] = []
    cur = bmm1.name
    batch: tuple[int, ...] = (groups,)
    nxt = sole_user(graph, cur)
    if nxt is not None and nxt.op in RESHAPES and len(nxt.info.shape) > 3 and \
            tuple(nxt.info.shape[-2:]) == (seq_q, seq_k) and math.prod(nxt.info.shape[:-2]) == groups:
        batch = tuple(nxt.info.shape[:-2])
        if len(batch) > 2:
            return None
        members.append(nxt.name)
        cur = nxt.name
    scores_shape = (*batch, seq_q, seq_k)
    found = _scores_to_softmax(graph, cur, scores_shape, members, constants)
    if found is None:
        return None
    softmax, scale, mask_kind = found
    found_bmm = _probabilities_to_bmm(graph, softmax, scores_shape, (groups, seq_q, seq_k), members)
    if found_bmm is None:
        return None
    bmm2, zero_empty_rows = found_bmm
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
        view = sole_user(graph, bmm2.name)
        if view is None or view.op not in RESHAPES or tuple(view.info.shape) != (*batch, seq_q, head_dim_v):
            return None
        members.append(view.name)
        core_out = view.name
    members += q.members + k.members + v.members
    return Core(q=q, k=k, v=v, batch=batch, causal=mask_kind == "causal", scale=scale * q.scale * k.scale,
                zero_empty_rows=zero_empty_rows, core_out=core_out, core_dtype=bmm2.info.dtype,
                members=members, constants=constants)


def _scores_to_softmax(graph: ProblemGraph, cur: str, scores_shape: tuple[int, ...], members: list[str],
                       constants: list[str]) -> tuple[Node, float, str] | None:
    """From the scores to the softmax over their last dim: scale factors, copies and casts, at most one mask. The
    softmax, the product of the scale factors and the mask's kind ("none" or "causal"); the nodes on the way are
    appended to ``members`` and the constants they read to ``constants``."""
    scale = 1.0
    mask_kind = "none"
    while True:
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
            members.append(node.name)
            return node, scale, mask_kind
        if node.op in ("mul", "div") and len(node.args) == 2:
            factor = _scale_factor(graph, node, cur, constants)
            if factor is None:
                return None
            scale *= factor
        elif node.op in COPIES or node.op in RESHAPES or node.op == "expand" or \
                (node.op in CASTS and cast_target(node) is not None):
            pass  # same shape as the scores (checked above): nothing changes but, perhaps, the rounding
        elif node.op in ("where", "add") and mask_kind == "none":
            kind = _mask_kind(graph, node, cur, scores_shape, constants)
            if kind is None:
                return None
            mask_kind = kind
        else:
            return None
        members.append(node.name)
        cur = node.name


def _scale_factor(graph: ProblemGraph, node: Node, cur: str, constants: list[str]) -> float | None:
    """The factor a ``mul``/``div`` of the scores by a positive number applies; the constant it reads, if a node,
    is appended to ``constants``."""
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
    if isinstance(const_arg, Ref):
        constants.append(const_arg.name)
    return number if node.op == "mul" else 1.0 / number


def _mask_kind(graph: ProblemGraph, node: Node, cur: str, scores_shape: tuple[int, ...],
               constants: list[str]) -> str | None:
    """What a ``where(mask, -inf, s)`` or an added 0/-inf bias does to the scores: "none", "causal", or None for
    anything else. The mask's constant nodes are appended to ``constants``."""
    evaluator = MaskEvaluator(graph)
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
        test = additive_test
    if sym is None:
        return None
    try:
        kind = masked_keys(sym, scores_shape, test)
    except NotAMask:
        return None
    if kind is None:
        return None
    constants.extend(evaluator.nodes)
    return kind


def _probabilities_to_bmm(graph: ProblemGraph, softmax: Node, scores_shape: tuple[int, ...],
                          bmm_shape: tuple[int, int, int], members: list[str]) -> tuple[Node, bool] | None:
    """From the softmax to the second bmm: SDPA's fix-up of fully masked rows, copies and casts, then
    torch.matmul's expand/merge view. The bmm and whether fully masked rows give 0; the nodes on the way are
    appended to ``members``."""
    zero_empty_rows = softmax.op == "_safe_softmax"
    cur = softmax.name
    fixup = _fixup_where(graph, softmax, softmax.args[0].name)
    if fixup is not None:
        where, chain = fixup
        members.extend(chain)
        zero_empty_rows = True
        cur = where.name
    while True:
        node = sole_user(graph, cur)
        if node is None:
            return None
        if node.op == "bmm":
            if node.args[0] != Ref(cur) or tuple(graph.info(cur).shape) != bmm_shape:
                return None
            return node, zero_empty_rows
        if node.op in COPIES or (node.op in CASTS and cast_target(node) is not None) or \
                (node.op == "expand" and tuple(node.info.shape) == scores_shape) or \
                (node.op in RESHAPES and tuple(node.info.shape) in (scores_shape, bmm_shape)):
            members.append(node.name)
            cur = node.name
            continue
        return None


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


def sdpa(graph: ProblemGraph, node: Node) -> Core | None:
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
    batch = broadcast_shape(q_shape[:-2], k_shape[:-2], v_shape[:-2])
    if batch is None or k_shape[-1] != q_shape[-1] or v_shape[-2] != k_shape[-2]:
        return None
    seq_q, seq_k = q_shape[-2], k_shape[-2]
    constants: list[str] = []
    causal = bool(bound.get("is_causal"))
    mask = bound.get("attn_mask", bound.get("attn_bias"))
    if mask is not None:
        evaluator = MaskEvaluator(graph)
        sym = evaluator.value(mask)
        if sym is None or causal:
            return None
        is_bool = graph.info(mask.name).dtype == torch.bool
        try:
            kind = masked_keys(sym, (*batch, seq_q, seq_k), (lambda x: not x) if is_bool else additive_test)
        except NotAMask:
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
    if any(operand_dtype([d]) is None for d in dtypes):
        return None
    identity = tuple(range(len(q_shape)))
    operands = [_Operand(source=x.name, perm=identity, dtype=d) for x, d in zip((q, k, v), dtypes)]
    return Core(q=operands[0], k=operands[1], v=operands[2], batch=batch, causal=causal,
                 scale=math.nan if scale is None else float(scale), zero_empty_rows=True, core_out=core_out,
                 core_dtype=graph.info(core_out).dtype, members=members, constants=constants)

