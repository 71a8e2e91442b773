"""What a scan absorbs: the pointwise chain that produces the scanned value and the one that consumes the result;
and the shape the group's operands broadcast to, which must be the scan's."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kernelwright.generate.families.base import Group, epilogue_chain, prologue_chain
from kernelwright.generate.graph import Node, ProblemGraph
from kernelwright.generate.operators import CONSTANTS


def candidates(graph: ProblemGraph, node: Node, source: str, claimed: set[str], shape: Sequence[int], *,
               flips: tuple[str, ...] = (), exclusive: tuple[str, ...] = ()) -> tuple[list[str], ...]:
    """The members to try, widest first: with the prologue, then without it. With ``flips`` (a reverse scan: the
    flip before it and the one after), the epilogue follows the second flip; with ``exclusive`` (an exclusive scan's
    slice, identity and cat) it follows the cat, and there is no prologue (the kernel reads the source one step
    behind, its own loads)."""
    if exclusive:
        core = [*exclusive[:-1], node.name, exclusive[-1]]
        return ([*core, *epilogue_chain(graph, core[-1], claimed)],)
    core = [flips[0], node.name, flips[1]] if flips else [node.name]
    epilogue = epilogue_chain(graph, core[-1], claimed)
    prologue = prologue_chain(graph, source, claimed, shape=shape)
    return [*prologue, *core, *epilogue], [*core, *epilogue]


def broadcast_shape(graph: ProblemGraph, group: Group) -> tuple[int, ...]:
    shapes = [graph.info(v).shape for v in group.inputs] + constant_shapes(graph, group)
    return tuple(torch.broadcast_shapes(*shapes))


def constant_shapes(graph: ProblemGraph, group: Group) -> list[tuple[int, ...]]:
    return [tuple(graph.info(n).shape) for n in group.nodes
            if graph.node(n).op in CONSTANTS - {"full_like"} and graph.info(n).numel > 1]  # full_like: its input's
