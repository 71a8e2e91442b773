"""The anchor of a batch-statistics normalisation group and who is who in it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelwright.generate.families.base import getitem_items
from kernelwright.generate.graph import Node, ProblemGraph, Ref

_FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)
WITH_RUNNING = "_native_batch_norm_legit_functional"
WITHOUT_RUNNING = "_native_batch_norm_legit"
# The operator's outputs by getitem index.
OUT, SAVE_MEAN, SAVE_RSTD, RUNNING_MEAN, RUNNING_VAR = range(5)


@dataclass(frozen=True)
class BatchNorm:
    """A training-mode batch norm: its operands (None where absent) and the getitems of its outputs in use."""

    node: str
    x: str
    weight: str | None
    bias: str | None
    running_mean: str | None
    running_var: str | None
    momentum: float
    eps: float
    items: tuple[tuple[int, str], ...]  # (output index, getitem name)

    def item(self, index: int) -> str | None:
        return dict(self.items).get(index)

    @property
    def members(self) -> list[str]:
        return [self.node, *(name for _, name in self.items)]


def _ref(value: object) -> str | None:
    return value.name if isinstance(value, Ref) else None


def match_batch_norm(graph: ProblemGraph, node: Node, claimed: set[str]) -> BatchNorm | None:
    """A batch norm normalising with its batch's statistics (training mode, or an instance norm), of one float
    type, ``[N, C, *]`` with 1-D parameters; else None."""
    if node.name in claimed or node.op not in (WITH_RUNNING, WITHOUT_RUNNING):
        return None
    args = list(node.args)
    if len(args) == 8:  # (x, weight, bias, running_mean, running_var, training, momentum, eps)
        x, weight, bias, mean, var, training, momentum, eps = args
    elif len(args) == 6 and node.op == WITHOUT_RUNNING:  # (x, weight, bias, training, momentum, eps)
        x, weight, bias, training, momentum, eps = args
        mean = var = None
    else:
        return None
    if training is not True or not isinstance(eps, (int, float)) or not isinstance(momentum, (int, float)):
        return None  # momentum None (a cumulative average) counts batches: left to PyTorch
    names = [_ref(v) for v in (x, weight, bias, mean, var)]
    if names[0] is None or any(v is not None and n is None for v, n in zip((weight, bias, mean, var), names[1:])):
        return None
    info = graph.info(names[0])
    if info.dtype not in _FLOAT_TYPES or len(info.shape) < 2 or info.numel == 0:
        return None
    if any(n is not None and tuple(graph.info(n).shape) != (info.shape[1],) for n in names[1:]):
        return None
    if node.op == WITH_RUNNING and (names[3] is None or names[4] is None):
        return None
    items = getitem_items(graph, node, claimed)
    if items is None:
        return None
    return BatchNorm(node=node.name, x=names[0], weight=names[1], bias=names[2], running_mean=names[3],
                     running_var=names[4], momentum=float(momentum), eps=float(eps), items=items)
