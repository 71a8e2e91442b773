"""The pointwise family: claims a run of elementwise nodes of one shape; its configurations are block sizes."""

from __future__ import annotations

from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    make_group,
    run_time_sizes,
)
from kernelwright.generate.families.pointwise.config import PointwiseConfig
from kernelwright.generate.families.pointwise.growing import absorb_constants, absorb_producers
from kernelwright.generate.families.pointwise.matching import anchors, connected_run
from kernelwright.generate.families.pointwise.writing import write
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph

NAME = "pointwise"



@register
class PointwiseFamily:
    name = NAME
    priority = 90  # claim order: last: it takes what is left

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        if not anchors(graph, node, claimed):
            return None
        shape = node.info.shape
        members = connected_run(graph, node, claimed, shape)
        absorb_producers(graph, members, claimed, shape)
        absorb_constants(graph, members, claimed)
        # Run-time sizes the members compute with (``x / x.shape[0]``): the launcher takes them after the tensors.
        sizes = tuple(dict.fromkeys(s for n in members for s in run_time_sizes(graph, graph.node(n)) or ()))
        group = make_group(graph, NAME, members, anchor=node.name, shape=tuple(shape), sizes=sizes)
        if not group.inputs or any(graph.info(o).shape != tuple(shape) for o in group.outputs):
            return None
        return group

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Memory-bound: enough bytes in flight per SM matters most. The default is a lead until timed.
        return [PointwiseConfig(BLOCK=b, num_warps=w) for b, w in ((1024, 4), (2048, 8), (4096, 8), (512, 4), (1024, 8))]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, PointwiseConfig.of(config), ident)
