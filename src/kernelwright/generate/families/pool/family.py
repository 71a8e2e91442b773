"""The pooling family: claims a max or average pooling with its pointwise epilogue; its configurations are block
sizes."""

from __future__ import annotations

from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    make_group,
    next_pow2,
)
from kernelwright.generate.families.pool.config import PoolConfig
from kernelwright.generate.families.pool.growing import absorb_epilogue, absorb_prologue
from kernelwright.generate.families.pool.matching import match_pooling
from kernelwright.generate.families.pool.writing import rows_apply, write
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph

NAME = "pool"



@register
class PoolFamily:
    name = NAME
    priority = 60  # claim order: a pooling window bounds its prologue and epilogue

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        pooling = match_pooling(graph, node, claimed)
        if pooling is None:
            return None
        prologue = absorb_prologue(graph, pooling, claimed)
        epilogue = absorb_epilogue(graph, pooling, claimed | set(prologue))
        shape = tuple(graph.info(pooling.values).shape)
        return make_group(graph, NAME, [*prologue, *pooling.members, *epilogue], anchor=node.name, pooling=pooling,
                          shape=shape, prologue=tuple(prologue), epilogue=tuple(epilogue))

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Memory-bound: every output reads its window (neighbouring windows share lines in L1/L2). BLOCK output
        # elements per program; leads until timed on the H200.
        lanes: list[Config] = [PoolConfig(BLOCK=b, num_warps=w) for b, w in ((512, 4), (1024, 8), (256, 2))]
        pool = group.detail["pooling"]
        if not rows_apply(pool, group.detail["prologue"]):
            return lanes
        # The rows variant (averages, and maxima without indices): (BLOCK outputs, TAPS) tiles, about 16 elements a
        # thread. A lane an output reads its taps ``stride`` elements apart across a warp (45_Average_Pooling_2D: 11
        # floats, 44 bytes; 0.63x eager at 6.455 ms, H200, 2026-12-03): where that gather is 16 bytes or wider the
        # rows go first. A lead, not yet timed.
        taps = next_pow2(pool.kernel[-1])
        rows: list[Config] = [PoolConfig(variant="rows", BLOCK=max(16, 16 * 32 * w // taps), num_warps=w)
                              for w in (4, 8)]
        itemsize = graph.info(pool.x).dtype.itemsize
        return [*rows, *lanes] if pool.stride[-1] * itemsize >= 16 else [*lanes, *rows]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, PoolConfig.of(config), ident)
