"""The anchor of a scan group: ``cumsum``/``cumprod`` of a tensor whose types the kernel can scan in."""

from __future__ import annotations

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import graph_node
from kernelwright.generate.families.symbolic import MaskEvaluator
from kernelwright.generate.graph import Node, ProblemGraph, Ref
from kernelwright.generate.operators import FREE

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


IDENTITY = {"cumsum": 0, "cumprod": 1}


def exclusive_scan(graph: ProblemGraph, node: Node, claimed: set[str]) -> tuple[str, tuple[str, ...], str] | None:
    """``cat([identity, scan(x[.., :n-1, ..])], d)`` — an exclusive scan (KernelBench's exclusive cumsum): element i is
    the scan of the elements before i. (x, the nodes the kernel replaces: the slice, the identity's nodes and the
    cat; the cat) where the slice, the scan and the identity are used by nothing else; else None. The kernel reads
    x one step behind, the identity in front: nothing is sliced, filled or concatenated."""
    rank = len(node.info.shape) if node.info is not None else 0
    sliced = graph_node(graph, node.args[0].name) if node.args and isinstance(node.args[0], Ref) else None
    users = graph.consumers(node.name)
    if not rank or sliced is None or sliced.op != "slice" or sliced.name in claimed or len(users) != 1 or \
            [u.name for u in graph.consumers(sliced.name)] != [node.name]:
        return None
    dim = scan_dim(node, rank)
    x = sliced.args[0]
    args = list(sliced.args) + [None] * (5 - len(sliced.args))
    if not isinstance(args[1], int) or {node.name, sliced.name} & set(graph.outputs):
        return None  # the scan itself (or the slice) is wanted too: it is not the kernel's result
    if not isinstance(x, Ref) or x.name not in graph.values or args[1] % rank != dim or args[2] not in (0, None) or \
            args[4] not in (1, None) or graph.info(x.name).shape[dim] != node.info.shape[dim] + 1:
        return None
    cat = users[0]
    parts = cat.args[0] if cat.op == "cat" and cat.args else None
    cat_dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    if cat.name in claimed or not isinstance(parts, (list, tuple)) or len(parts) != 2 or \
            not isinstance(parts[0], Ref) or parts[1] != Ref(node.name) or cat_dim % rank != dim or \
            cat.info is None or tuple(cat.info.shape) != tuple(graph.info(x.name).shape):
        return None
    evaluator = MaskEvaluator(graph)
    fill = evaluator.value(parts[0])
    if fill is None or fill.affine is not None or fill.forms or fill.at(lambda k: 0) != IDENTITY[node.op]:
        return None
    replaced = [sliced.name, *_with_views(graph, evaluator.nodes, x.name), cat.name]
    if any(n in claimed for n in replaced) or any(n in graph.outputs for n in replaced[:-1]) or \
            any(u not in {*replaced, node.name} for n in replaced[:-1] for u in graph.users.get(n, [])):
        return None
    return x.name, tuple(replaced), cat.name


def _with_views(graph: ProblemGraph, nodes: set[str], stop: str) -> list[str]:
    """``nodes`` and the views (of ``stop``) that only they read, in graph order."""
    found, frontier = set(nodes), list(nodes)
    while frontier:
        node = graph.node(frontier.pop())
        for arg in node.args:
            if isinstance(arg, Ref) and arg.name != stop and arg.name not in found:
                view = graph_node(graph, arg.name)
                if view is not None and view.op in FREE and all(u in found for u in graph.users.get(arg.name, [])):
                    found.add(arg.name)
                    frontier.append(arg.name)
    return [n.name for n in graph.nodes if n.name in found]
