"""What a pooling absorbs: the pointwise nodes that produce the pooled tensor (recomputed at every tap, so only
where windows do not overlap) and those that consume its result, element by element, at its shape."""

from __future__ import annotations

import torch

from kernelwright.generate.families.base import epilogue_graph, group_io, prologue_chain
from kernelwright.generate.families.pool.matching import Pooling
from kernelwright.generate.graph import ProblemGraph
from kernelwright.generate.operators import CONSTANTS


def absorb_epilogue(graph: ProblemGraph, pooling: Pooling, claimed: set[str]) -> list[str]:
    """The pointwise epilogue (activations, a bias, a residual, casts; a DAG such as ``x * sigmoid(x)``) computed
    on the pooled value before the single store. Nodes that read the indices are left out: the values' members
    are what the epilogue may start from, so a node that also needs the indices depends on the group and stays
    outside."""
    members = [m for m in pooling.members if m != pooling.indices]
    return epilogue_graph(graph, members, claimed, graph.info(pooling.values).shape)


def absorb_prologue(graph: ProblemGraph, pooling: Pooling, claimed: set[str]) -> list[str]:
    """The pointwise chain that produces the pooled tensor, computed at each tap instead of written and read back.
    Only where no two windows share a tap (stride at least the dilated kernel), so nothing is computed twice; and
    only where the chain's tensors broadcast to the pooled tensor's shape, which the launcher reads sizes from."""
    if any(s < d * (k - 1) + 1 for k, s, d in zip(pooling.kernel, pooling.stride, pooling.dilation)):
        return []
    shape = tuple(graph.info(pooling.x).shape)
    chain = prologue_chain(graph, pooling.x, claimed, shape=shape)
    if not chain or any(graph.node(n).op in CONSTANTS and graph.info(n).numel > 1 for n in chain):
        return []
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    chain.sort(key=order.__getitem__)  # in graph order, as the kernel computes it
    inputs, _ = group_io(graph, chain)
    if not inputs or tuple(torch.broadcast_shapes(*(graph.info(v).shape for v in inputs))) != shape:
        return []
    return chain
