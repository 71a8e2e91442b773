"""What a reduction group is: the layout (which elements reduce together), the kernel's values — a *full* tile of
the input's shape, a *per-row* vector, or a constant — and the operations that define them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import broadcastable
from kernelwright.generate.graph import ProblemGraph

NAME = "reduction"
FULL, VEC, CONST = "full", "vec", "const"  # a tile of the input's shape, one value per output row, a constant


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


def operand_ok(graph: ProblemGraph, layout: Layout, value: str, level: str) -> bool:
    """Whether the kernel can read ``value`` where it works at ``level`` (full tiles or per-row vectors)."""
    if value not in graph.values or graph.info(value).dtype not in expr.TL_DTYPE:
        return False
    shape = graph.info(value).shape
    if level == FULL:
        return full_class(layout, shape) is not None
    return vec_class(layout, shape) is not None
