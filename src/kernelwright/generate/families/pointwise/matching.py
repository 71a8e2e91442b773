"""The pointwise run a node starts: every later node that consumes the run, element by element, at its shape."""

from __future__ import annotations

from collections.abc import Sequence

from kernelwright.generate.families.base import broadcastable, depends_on, fusable_pointwise
from kernelwright.generate.graph import Node, ProblemGraph, node_inputs
from kernelwright.generate.operators import CONSTANTS


def anchors(graph: ProblemGraph, node: Node, claimed: set[str]) -> bool:
    """Whether ``node`` can start a pointwise group."""
    return node.name not in claimed and fusable_pointwise(node, graph) and node.info is not None and \
        node.op not in CONSTANTS


def connected_run(graph: ProblemGraph, node: Node, claimed: set[str], shape: Sequence[int]) -> list[str]:
    """``node`` and the unclaimed pointwise nodes after it that read the run, in graph order."""
    members: list[str] = []
    member_set: set[str] = set()
    order = [n for n in graph.nodes if n.name not in claimed]
    start = order.index(node)
    for candidate in order[start:]:
        if candidate.name != node.name:
            if not fusable_pointwise(candidate, graph) or candidate.info is None:
                continue
            inputs = node_inputs(candidate)
            if not any(v in member_set for v in inputs):
                continue
            if candidate.info.shape != shape and candidate.op not in CONSTANTS:
                continue
        # Every operand from outside must broadcast to the result and must not itself need the group.
        memo: dict[str, bool] = {}
        outside = [v for v in node_inputs(candidate) if v not in member_set]
        if any(v in graph.values and not broadcastable(graph.info(v).shape, shape) for v in outside):
            continue
        if any(depends_on(graph, v, member_set, memo) for v in outside):
            continue
        members.append(candidate.name)
        member_set.add(candidate.name)
    return members
