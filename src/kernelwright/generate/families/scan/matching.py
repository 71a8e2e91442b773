"""The anchor of a scan group: ``cumsum``/``cumprod`` of a tensor whose types the kernel can scan in."""

from __future__ import annotations

import torch

from kernelwright.generate import expr
from kernelwright.generate.graph import Node, ProblemGraph

SCAN_OPS = ("cumsum", "cumprod")


def scan_dim(node: Node, rank: int) -> int:
    dim = node.args[1] if len(node.args) > 1 else node.kwargs["dim"]
    return dim % rank


def out_dtype(node: Node) -> torch.dtype:
    assert node.info is not None
    return node.info.dtype


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
