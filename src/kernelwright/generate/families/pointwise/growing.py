"""What a pointwise run absorbs around it: the producers of its operands and the constants only it uses."""

from __future__ import annotations

from collections.abc import Sequence

from kernelwright.generate.families.base import depends_on, fusable_pointwise
from kernelwright.generate.graph import ProblemGraph, node_inputs
from kernelwright.generate.operators import CONSTANTS


def absorb_producers(graph: ProblemGraph, members: list[str], claimed: set[str], shape: Sequence[int]) -> None:
    """Producers of operands that are themselves pointwise with the result's shape are computed here too, so a
    branch such as tanh(x) in f(x) - tanh(x) does not cost a kernel (and a round trip) of its own. Appends them to
    ``members``."""
    member_set = set(members)
    grew = True
    while grew:
        grew = False
        for name in list(member_set):
            for v in node_inputs(graph.node(name)):
                if v in member_set or v in claimed or v not in graph.users:
                    continue
                try:
                    producer = graph.node(v)
                except KeyError:
                    continue  # a placeholder
                if not fusable_pointwise(producer) or producer.op in CONSTANTS or \
                        producer.info is None or producer.info.shape != shape:
                    continue
                memo: dict[str, bool] = {}
                if any(depends_on(graph, w, member_set, memo) for w in node_inputs(producer)):
                    continue
                members.append(v)
                member_set.add(v)
                grew = True


def absorb_constants(graph: ProblemGraph, members: list[str], claimed: set[str]) -> None:
    """Constants only the group uses are computed inline; others stay outside. Appends them to ``members``."""
    member_set = set(members)
    for n in graph.nodes:
        if n.op in CONSTANTS and n.name not in claimed and n.name not in member_set and \
                graph.users.get(n.name) and all(u in member_set for u in graph.users[n.name]):
            members.append(n.name)
            member_set.add(n.name)
