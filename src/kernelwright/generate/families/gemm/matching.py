"""The anchor of a GEMM group — ``mm``, ``addmm``, ``bmm``, ``baddbmm`` — and its operands traced back through the
glue export puts before it (permutes, views, expands, copies, one cast), with every size kept symbolic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from kernelwright.generate.families.base import broadcastable
from kernelwright.generate.families.gemm.model import (
    Atom,
    Bcast,
    Dim,
    Operand,
    Step,
    dim_size,
    expand_dims,
    regroup,
)
from kernelwright.generate.graph import Node, ProblemGraph, Ref
from kernelwright.generate.operators import CASTS, COPIES, EXPANDS, PERMUTES, RESHAPES, UNIT_DIMS

ANCHORS = {"mm": 2, "addmm": 2, "bmm": 3, "baddbmm": 3}  # operator -> rank of its operands
_DOT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
GLUE_RESHAPES = RESHAPES | UNIT_DIMS  # the group replays them as reshapes, and the epilogue's views too
# Copies are glue too: the kernel reads through strides, which makes them free.
_GLUE = GLUE_RESHAPES | PERMUTES | COPIES | CASTS | EXPANDS


@dataclass(frozen=True, kw_only=True)
class Matmul:
    """A matmul the family does, its operands as the kernel reads them and the glue they were traced through."""

    anchor: Node
    rank: int  # of the operands: 2 (mm, addmm) or 3 (bmm, baddbmm)
    a: Operand
    b: Operand
    a_glue: tuple[str, ...]
    b_glue: tuple[str, ...]
    out_dims: tuple[Dim, ...]  # the result's symbolic shape
    resolved: dict[str, Dim]  # Bcast key -> the dimension it stands for
    alpha: float
    beta: float
    bias: str | None  # addmm/baddbmm's added tensor (None for mm/bmm, and where beta == 0)


def match_matmul(graph: ProblemGraph, anchor: Node, claimed: set[str]) -> Matmul | None:
    """The matmul at ``anchor``; None where it is none this family does."""
    rank = ANCHORS.get(anchor.op)
    if rank is None or anchor.info is None or anchor.info.dtype not in _DOT_DTYPES or 0 in anchor.info.shape:
        return None
    with_bias = anchor.op in ("addmm", "baddbmm")
    refs = anchor.args[1:3] if with_bias else anchor.args[:2]
    if not all(isinstance(r, Ref) for r in refs):
        return None
    traced = [_trace_operand(graph, r.name, claimed) for r in refs]
    if traced[0] is None or traced[1] is None:
        return None
    (a, a_glue), (b, b_glue) = traced
    if len(a.dims) != rank or len(b.dims) != rank or a.dtype != b.dtype:
        return None
    if a.dtype == torch.float32 and a.load_dtype == b.load_dtype and a.load_dtype != torch.float32:
        # An fp32 matmul of values cast up from fp16/bf16 (export's decomposition of a half-precision baddbmm,
        # or x.float() @ w.float()): their products are exact in fp32, so the 16-bit tensor-core dot with fp32
        # accumulation computes the same sums, without the casts.
        a, b = replace(a, dtype=a.load_dtype), replace(b, dtype=b.load_dtype)
    resolved: dict[str, Dim] = {}
    _pair(a.dims[-1], b.dims[-2], resolved)
    _pair(b.dims[-2], a.dims[-1], resolved)
    if rank == 3:
        _pair(a.dims[0], b.dims[0], resolved)
        _pair(b.dims[0], a.dims[0], resolved)
        batch = a.dims[0] if not any(isinstance(f, Bcast) for f in a.dims[0]) else b.dims[0]
        out_dims: tuple[Dim, ...] = (batch, a.dims[1], b.dims[2])
    else:
        out_dims = (a.dims[0], b.dims[1])
    alpha = float(anchor.kwargs.get("alpha", anchor.args[4] if len(anchor.args) > 4 else 1))
    beta = float(anchor.kwargs.get("beta", anchor.args[3] if len(anchor.args) > 3 else 1))
    bias = None
    if with_bias and beta != 0:  # beta == 0: the added tensor is ignored, NaN and all (PyTorch's rule)
        c = anchor.args[0]
        if not isinstance(c, Ref) or not broadcastable(graph.info(c.name).shape, anchor.info.shape):
            return None
        bias = c.name
    return Matmul(anchor=anchor, rank=rank, a=a, b=b, a_glue=tuple(a_glue), b_glue=tuple(b_glue), out_dims=out_dims,
                  resolved=resolved, alpha=alpha, beta=beta, bias=bias)


def _perm(node: Node, rank: int) -> tuple[int, ...] | None:
    if node.op == "permute":
        return tuple(d % rank for d in node.args[1]) if rank else ()
    if node.op == "t":
        return tuple(reversed(range(rank)))
    if node.op == "transpose":
        d0, d1 = (d % rank for d in node.args[1:3])
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return tuple(perm)
    return None


def _glue_chain(graph: ProblemGraph, value: str, claimed: set[str]) -> list[Node]:
    """The glue nodes producing ``value``, source first: each used once, not claimed, not a graph output."""
    chain: list[Node] = []
    current = value
    while current not in graph.outputs and len(graph.users.get(current, [])) == 1:
        try:
            node = graph.node(current)
        except KeyError:
            break  # a placeholder
        if node.name in claimed or node.op not in _GLUE or node.info is None or \
                not node.args or not isinstance(node.args[0], Ref):
            break
        if node.op in COPIES | CASTS and not set(node.kwargs) <= {"dtype", "memory_format"}:
            break
        if node.op not in CASTS and node.info.dtype != graph.info(node.args[0].name).dtype:
            break  # view(x, dtype): a reinterpretation, not glue
        chain.append(node)
        current = node.args[0].name
    chain.reverse()
    return chain


def _trace_operand(graph: ProblemGraph, value: str, claimed: set[str]) -> tuple[Operand, list[str]] | None:
    """The operand and the glue the group takes for it: the longest readable end of the chain."""
    chain = _glue_chain(graph, value, claimed)
    while True:
        operand = _replay(graph, chain, value)
        if operand is not None:
            return operand, [n.name for n in chain]
        if not chain:
            return None
        chain = chain[1:]


def _replay(graph: ProblemGraph, chain: Sequence[Node], value: str) -> Operand | None:
    source = chain[0].args[0].name if chain else value
    info = graph.info(source)
    dims: list[Dim] = [(Atom(source, d, s),) if s != 1 else () for d, s in enumerate(info.shape)]
    dtype = info.dtype
    casts = 0
    steps: list[Step] = []
    for node in chain:
        shape = node.info.shape
        if node.op in PERMUTES:
            perm = _perm(node, len(dims))
            if perm is None:
                return None
            dims = [dims[p] for p in perm]
            if steps and steps[-1].kind == "permute":  # permute(p).permute(q) is permute(p[q])
                first = steps.pop().perm
                perm = tuple(first[p] for p in perm)
            if perm != tuple(range(len(perm))):
                steps.append(Step("permute", perm=perm))
        elif node.op in GLUE_RESHAPES:
            new = regroup(dims, shape)
            if new is None:
                return None
            if new != dims:
                steps.append(Step("reshape", dims=tuple(new)))
            dims = new
        elif node.op == "expand":
            new = expand_dims(dims, shape, node.name)
            if new is None:
                return None
            if new != dims:
                steps.append(Step("expand", dims=tuple(new)))
            dims = new
        elif node.op in CASTS and node.info.dtype != dtype:
            casts += 1
            dtype = node.info.dtype
        if tuple(dim_size(d) for d in dims) != tuple(shape):
            return None  # a reading the traced sizes contradict: leave this glue to PyTorch
    if casts > 1 or dtype not in _DOT_DTYPES or info.dtype not in _DOT_DTYPES:
        return None
    return Operand(source=source, steps=tuple(steps), dims=tuple(dims), load_dtype=info.dtype, dtype=dtype)


def _pair(dim: Dim, reference: Dim, resolved: dict[str, Dim]) -> None:
    """Resolve the expand sizes in ``dim`` from the dimension the matmul pairs it with."""
    if not any(isinstance(f, Bcast) for f in dim) or any(isinstance(f, Bcast) for f in reference):
        return
    if len(dim) == 1:
        resolved[dim[0].key] = reference
    elif len(dim) == len(reference):
        for f, r in zip(dim, reference):
            if isinstance(f, Bcast) and f.size == r.size:
                resolved[f.key] = (r,)

