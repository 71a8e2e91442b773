"""What a convolution absorbs: an eval-mode batch norm of its result, then the pointwise nodes that consume it."""

from __future__ import annotations

from typing import Any

from kernelwright.generate.families.base import epilogue_graph
from kernelwright.generate.families.conv.matching import ref_name
from kernelwright.generate.graph import Node, ProblemGraph, Ref

BATCH_NORM_EVAL = "_native_batch_norm_legit_no_training"


def absorb_epilogue(graph: ProblemGraph, conv: Node, claimed: set[str], detail: dict[str, Any]) -> list[str]:
    """The group's members: the convolution, its batch norm (with the facts it adds to ``detail``) and the
    pointwise epilogue (recorded in ``detail["pointwise"]``)."""
    members = [conv.name]
    bn = batch_norm(graph, conv, claimed)
    if bn is not None:
        bn_node, getitem = bn
        members += [bn_node.name, getitem.name]
        detail.update(bn=getitem.name, bn_weight=ref_name(bn_node.args[1]), bn_bias=ref_name(bn_node.args[2]),
                      bn_mean=ref_name(bn_node.args[3]), bn_var=ref_name(bn_node.args[4]),
                      bn_eps=float(bn_node.args[6]))
    pointwise = epilogue_graph(graph, members, claimed, conv.info.shape)
    detail["pointwise"] = tuple(pointwise)
    return [*members, *pointwise]


def batch_norm(graph: ProblemGraph, conv: Node, claimed: set[str]) -> tuple[Node, Node] | None:
    """The eval-mode batch norm applied to the convolution's result, and the getitem of its output."""
    for user in graph.consumers(conv.name):
        if user.op != BATCH_NORM_EVAL or user.name in claimed or user.args[0] != Ref(conv.name):
            continue
        if ref_name(user.args[3]) is None or ref_name(user.args[4]) is None:
            return None
        getitems = graph.consumers(user.name)
        if len(getitems) != 1 or getitems[0].op != "getitem" or getitems[0].args[1] != 0:
            return None  # the saved statistics are used: leave it to PyTorch
        params = [ref_name(a) for a in user.args[1:5]]
        if any(p is not None and len(graph.info(p).shape) != 1 for p in params):
            return None
        return user, getitems[0]
    return None
