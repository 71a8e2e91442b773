"""The batch-statistics normalisation family: claims a training-mode batch norm (or an instance norm's) with its
pointwise epilogue; its configurations are block sizes."""

from __future__ import annotations

from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    epilogue_graph,
    make_group,
)
from kernelwright.generate.families.batchnorm.config import BatchNormConfig
from kernelwright.generate.families.batchnorm.matching import OUT, match_batch_norm
from kernelwright.generate.families.batchnorm.writing import write
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph, node_inputs

NAME = "batchnorm"



@register
class BatchNormFamily:
    name = NAME
    priority = 70  # claim order: after the families whose epilogues may absorb an eval-mode batch norm

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        bn = match_batch_norm(graph, node, claimed)
        if bn is None:
            return None
        shape = tuple(graph.info(bn.x).shape)
        epilogue: list[str] = []
        if bn.item(OUT) is not None:
            epilogue = epilogue_graph(graph, bn.members, claimed, shape)
            statistics = {name for index, name in bn.items if index != OUT}
            if any(statistics & set(node_inputs(graph.node(n))) for n in epilogue):
                epilogue = []  # a node that also reads the saved or running statistics: left outside
        return make_group(graph, NAME, [*bn.members, *epilogue], anchor=node.name, bn=bn, shape=shape,
                          epilogue=tuple(epilogue))

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Memory-bound passes: the statistics read the input once, the apply pass reads it again and writes the
        # output. BLOCK elements a program step in each; leads until timed on the H200.
        return [BatchNormConfig(BLOCK=b, num_warps=w) for b, w in ((1024, 4), (2048, 8), (512, 4))]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, BatchNormConfig.of(config), ident)
