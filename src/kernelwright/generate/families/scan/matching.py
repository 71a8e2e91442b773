"""The anchor of a scan group: ``cumsum``/``cumprod`` of a tensor whose types the kernel can scan in."""

from __future__ import annotations

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import graph_node
from kernelwright.generate.graph import Node, ProblemGraph

SCAN_OPS = ("cumsum", "cumprod")


def scan_dim(node: Node, rank: int) -> int:
    dim = node.args[1] if len(node.args) > 1 else node.kwargs["dim"]
    return dim % rank


def out_dtype(node: Node) -> torch.dtype:
    assert node.info is not None
    return node.info.dtype


def _flip_dims(node: Node, rank: int) -> list[int] | None:
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) for d in dims):
        return None
    return sorted({d % rank for d in dims})


def reversed_scan(graph: ProblemGraph, node: Node, claimed: set[str]) -> tuple[str, str, str] | None:
    """``flip(scan(flip(x, [d]), d), [d])`` — a scan from the end of the dimension (KernelBench's reverse cumsum):
    (x, the first flip, the second) where the flips are the scan's only neighbours; else None."""
    rank = len(node.info.shape) if node.info is not None else 0
    before = node.args[0] if node.args else None
    if not rank or not hasattr(before, "name") or before.name in claimed or before.name not in graph.values:
        return None
    first = graph_node(graph, before.name)  # None for a placeholder (the forward's input)
    users = graph.consumers(node.name)
    if first is None or first.op != "flip" or [u.name for u in graph.consumers(first.name)] != [node.name] or len(users) != 1:
        return None
    second = users[0]
    dim = scan_dim(node, rank)
    if second.op != "flip" or second.name in claimed or _flip_dims(first, rank) != [dim] or \
            _flip_dims(second, rank) != [dim]:
        return None
    x = first.args[0]
    if not hasattr(x, "name") or x.name not in graph.values:
        return None
    return x.name, first.name, second.name


def scanned_source(graph: ProblemGraph, node: Node, claimed: set[str]) -> str | None:
    """The value ``node`` scans, where ``node`` is a scan this family writes; else None."""
    if node.name in claimed or node.op not in SCAN_OPS or node.info is None or not node.info.shape:
        return None
    source = node.args[0]
    if not hasattr(source, "name") or source.name not in graph.values:
        return None
    in_dtype, result_dtype = graph.info(source.name).dtype, out_dtype(node)
    if result_dtype not in expr.TL_DTYPE or in_dtype not in expr.TL_DTYPE or result_dtype == torch.bool:
        return None
    if in_dtype.is_floating_point and not result_dtype.is_floating_point:
        return None  # cumsum(float, dtype=int) truncates first; rare, left to PyTorch
    return source.name
