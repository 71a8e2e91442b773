"""What a GEMM group is: sizes as products of the group inputs' dimensions (read at run time), the glue steps the
launcher replays on each operand, the operands as the matmul sees them, and the plan a claimed group holds."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Atom:
    """Dimension ``dim`` of the group input ``value``: read from the tensor at run time."""

    value: str
    dim: int
    size: int  # at the traced shape

    def expr(self) -> str:
        return f"{self.value}.shape[{self.dim}]"


@dataclass(frozen=True)
class Bcast:
    """A size an ``expand`` introduced (baked in the graph): resolved to the dimension the matmul pairs it
    with on the other operand, else kept as the traced constant."""

    key: str
    size: int


Factor = Atom | Bcast
Dim = tuple[Factor, ...]  # a product of factors; () is 1


def dim_size(dim: Dim) -> int:
    return math.prod(f.size for f in dim)


def _split(factors: Sequence[Factor], sizes: Sequence[int]) -> list[Dim] | None:
    """``factors`` (in order) cut into consecutive products equal to ``sizes``; None if no cut fits."""
    pending = [f for f in factors if f.size != 1]
    result: list[Dim] = []
    for size in sizes:
        taken: list[Factor] = []
        while dim_size(tuple(taken)) < size and pending:
            taken.append(pending.pop(0))
        if dim_size(tuple(taken)) != size:
            return None
        result.append(tuple(taken))
    return result if not pending else None


def regroup(dims: Sequence[Dim], shape: Sequence[int]) -> list[Dim] | None:
    """The symbolic dimensions of ``reshape(shape)`` of a tensor whose dimensions are ``dims``: merged
    dimensions multiply their factors, split ones cut them at factor boundaries. None where a cut falls inside
    a factor (``view(x, [3, -1])`` of a dimension of 15: which part would vary is unknowable)."""
    sizes = [dim_size(d) for d in dims]
    if 0 in sizes or 0 in shape:
        return None
    result: list[Dim] = []
    i = j = 0
    while j < len(shape):
        if shape[j] == 1:
            result.append(())
            j += 1
            continue
        while i < len(dims) and sizes[i] == 1:
            i += 1
        if i == len(dims):
            return None
        factors, have = list(dims[i]), sizes[i]
        i += 1
        outs, want = [shape[j]], shape[j]
        j += 1
        while have != want:
            if have < want:
                while i < len(dims) and sizes[i] == 1:
                    i += 1
                if i == len(dims):
                    return None
                factors += dims[i]
                have *= sizes[i]
                i += 1
            else:
                if j == len(shape):
                    return None
                outs.append(shape[j])
                want *= shape[j]
                j += 1
        if len(outs) == 1:
            result.append(tuple(factors))
        else:
            split = _split(factors, outs)
            if split is None:
                return None
            result += split
    if any(s != 1 for s in sizes[i:]):
        return None
    return result


def expand_dims(dims: Sequence[Dim], shape: Sequence[int], key: str) -> list[Dim] | None:
    offset = len(shape) - len(dims)
    if offset < 0:
        return None
    result: list[Dim] = []
    for k, size in enumerate(shape):
        if k >= offset and dim_size(dims[k - offset]) == size:
            result.append(dims[k - offset])
        elif size == 1:
            result.append(())
        elif k < offset or dim_size(dims[k - offset]) == 1:
            result.append((Bcast(f"{key}:{k}", size),))
        else:
            return None
    return result


@dataclass(frozen=True)
class Step:
    """One glue operation, replayed by the launcher with run-time sizes."""

    kind: str  # "reshape", "permute" or "expand"
    dims: tuple[Dim, ...] = ()
    perm: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Operand:
    source: str  # the group input it is read from
    steps: tuple[Step, ...]
    dims: tuple[Dim, ...]  # as the matmul sees it: [M, K] / [K, N], with a leading batch dimension for bmm
    load_dtype: torch.dtype  # what memory holds
    dtype: torch.dtype  # what the dot takes (differs where the glue had a cast)


@dataclass(frozen=True, kw_only=True)
class GemmPlan:
    anchor: str
    batched: bool
    a: Operand
    b: Operand
    bias: str | None  # addmm/baddbmm's added tensor (None for mm/bmm, and where beta == 0)
    alpha: float
    beta: float
    epilogue: tuple[str, ...]  # member nodes after the anchor, in graph order: views and pointwise nodes
    producers: tuple[str, ...]  # pointwise nodes computing epilogue operands, recomputed on the tile
    constants: tuple[str, ...]  # constant nodes (full, scalar_tensor) only the epilogue reads: inlined
    levels: Mapping[str, tuple[Dim, ...]]  # symbolic shape of the anchor and of every epilogue value
    operand_levels: Mapping[str, tuple[Dim, ...]]  # epilogue operand -> the shape it is broadcast to
    # epilogue operands computed from the tile's coordinates: (row coefficient, column coefficient, constant)
    indices: Mapping[str, tuple[int, int, float]] = field(default_factory=dict)
    resolved: Mapping[str, Dim] = field(default_factory=dict)  # Bcast key -> the dimension it stands for
