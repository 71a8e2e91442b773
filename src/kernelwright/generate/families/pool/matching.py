"""The anchor of a pooling group: a max or average pooling operator as core aten writes it, its options read from
the operator's schema, and the getitems that take its values (and indices) apart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.operator_schemas import normalize_function

from kernelwright.generate.graph import Node, ProblemGraph, Ref

_FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)

# Operator -> (kind, spatial dimensions). 1-D pooling reaches core aten as an unsqueeze and the 2-D operator with a
# kernel of height 1; adaptive pooling to size 1 as a mean (the reduction family's).
POOL_OPS = {
    "max_pool2d_with_indices": ("max", 2),
    "max_pool3d_with_indices": ("max", 3),
    "max_pool2d": ("max", 2),
    "max_pool3d": ("max", 3),
    "avg_pool2d": ("avg", 2),
    "avg_pool3d": ("avg", 3),
}


@dataclass(frozen=True)
class Pooling:
    """What one pooling node computes; every option is a constant of the graph (the kernel's structure)."""

    kind: str  # "max" or "avg"
    x: str  # the pooled tensor
    kernel: tuple[int, ...]  # one entry a spatial dimension
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    ceil_mode: bool
    count_include_pad: bool
    divisor_override: int | None
    values: str  # the value holding the pooled result (a getitem 0, or the node itself)
    indices: str | None  # the getitem holding max pooling's indices, where they are used
    members: tuple[str, ...]  # the pooling node and its getitems (an unused one included: nothing to compute)

    @property
    def rank(self) -> int:
        return len(self.kernel)


def _arguments(node: Node) -> dict[str, Any]:
    """The operator's arguments by name, defaults filled in from its schema."""
    bound = normalize_function(node.target, tuple(node.args), dict(node.kwargs), normalize_to_only_use_kwargs=True)
    return dict(bound.kwargs) if bound is not None else {}


def _spatial(value: Any, rank: int, default: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """An int-list argument spread over ``rank`` dimensions (one entry stands for all); ``default`` when empty."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
        return None
    if not value:
        return default
    if len(value) == 1:
        return (int(value[0]),) * rank
    return tuple(int(v) for v in value) if len(value) == rank else None


def _getitems(graph: ProblemGraph, node: Node) -> dict[int, str] | None:
    """The getitems of a multi-output pooling node by output index; None if something else reads it."""
    items: dict[int, str] = {}
    for user in graph.consumers(node.name):
        if user.op != "getitem" or user.args[1] not in (0, 1) or user.args[1] in items:
            return None
        items[user.args[1]] = user.name
    return items


def _outputs(graph: ProblemGraph, node: Node) -> tuple[str, str | None, tuple[str, ...]] | None:
    """The node holding the pooled values, the one holding the indices (None where unused), and the members."""
    if node.info is not None:
        return node.name, None, (node.name,)  # a single-output operator
    items = _getitems(graph, node)
    if items is None or 0 not in items:
        return None
    indices = items.get(1)
    members = (node.name, *items.values())
    if indices is not None and not graph.users.get(indices) and indices not in graph.outputs:
        indices = None
    return items[0], indices, members


def match_pooling(graph: ProblemGraph, node: Node, claimed: set[str]) -> Pooling | None:
    """The pooling ``node`` computes, where it is one this family writes; else None."""
    if node.name in claimed or node.op not in POOL_OPS or not isinstance(node.args[0], Ref):
        return None
    kind, rank = POOL_OPS[node.op]
    x = node.args[0].name
    if x not in graph.values:
        return None
    info = graph.info(x)
    if info.dtype not in _FLOAT_TYPES or len(info.shape) not in (rank + 1, rank + 2):
        return None
    outputs = _outputs(graph, node)
    if outputs is None or graph.info(outputs[0]).dtype != info.dtype or outputs[0] in claimed:
        return None
    args = _arguments(node)
    kernel = _spatial(args.get("kernel_size"), rank)
    if kernel is None:
        return None
    stride = _spatial(args.get("stride", []), rank, kernel)
    padding = _spatial(args.get("padding", 0), rank)
    dilation = _spatial(args.get("dilation", 1), rank) if kind == "max" else (1,) * rank
    divisor = args.get("divisor_override")
    if stride is None or padding is None or dilation is None or not (divisor is None or isinstance(divisor, int)):
        return None
    if min(kernel + stride + dilation) < 1 or min(padding) < 0 or divisor == 0:
        return None
    return Pooling(kind=kind, x=x, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                   ceil_mode=bool(args.get("ceil_mode", False)),
                   count_include_pad=bool(args.get("count_include_pad", True)), divisor_override=divisor,
                   values=outputs[0], indices=outputs[1], members=outputs[2])
