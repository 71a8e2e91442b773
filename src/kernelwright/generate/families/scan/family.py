"""The scan family: claims a scan with its prologue and epilogue; its configurations are tile sizes."""

from __future__ import annotations

from kernelwright.generate.families.base import DEFAULT_POLICY, Config, Group, Policy, Rendered, make_group
from kernelwright.generate.families.registry import register
from kernelwright.generate.families.scan.config import ScanConfig
from kernelwright.generate.families.scan.growing import broadcast_shape, candidates
from kernelwright.generate.families.scan.matching import (
    exclusive_scan,
    reversed_scan,
    scan_dim,
    scanned_source,
)
from kernelwright.generate.families.scan.writing import write
from kernelwright.generate.graph import Node, ProblemGraph, node_inputs

NAME = "scan"



@register
class ScanFamily:
    name = NAME
    priority = 50  # claim order: a scan bounds its prologue and epilogue

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        source = scanned_source(graph, node, claimed)
        if source is None:
            return None
        shape = node.info.shape
        dim = scan_dim(node, len(shape))
        flipped = reversed_scan(graph, node, claimed)
        flips: tuple[str, ...] = ()
        exclusive: tuple[str, ...] = ()
        if flipped is not None:  # scanned from the end: the flips are the kernel's walk, never materialised
            source, first, second = flipped
            flips = (first, second)
        elif (shifted := exclusive_scan(graph, node, claimed)) is not None:  # read one step behind
            source, exclusive, cat = shifted
            shape = graph.info(cat).shape
        for nodes in candidates(graph, node, source, claimed, shape, flips=flips, exclusive=exclusive):
            group = make_group(graph, NAME, nodes, anchor=node.name, shape=tuple(shape), dim=dim, op=node.op,
                               source=source, flips=flips, exclusive=exclusive)
            if exclusive and source in {v for n in group.nodes if n not in exclusive and n != node.name
                                        for v in node_inputs(graph.node(n))}:
                continue  # the epilogue reads x where the scan reads it one step behind
            if group.inputs and broadcast_shape(graph, group) == tuple(shape):
                return group
        return None  # a scan of a constant: nothing to read

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Memory-bound, one pass. BLOCK is the tile in elements (the launcher narrows it to the row length and
        # packs short rows); the defaults are leads until timed on the H200.
        shape, dim = group.detail["shape"], group.detail["dim"]
        if dim == len(shape) - 1:
            return [ScanConfig(BLOCK=b, num_warps=w)
                    for b, w in ((1024, 4), (2048, 8), (4096, 8), (4096, 16), (512, 4))]
        # Inner-dim scans: COLS neighbouring columns per program (>= 32 fp32 = one 128-byte line per row of the
        # tile); fewer columns give more programs when outer * inner is small.
        # The first two pipeline the loop's loads (base.loop_header): without, a program walking the 4096 steps of
        # cumsum_dim1 has one tile in flight. Measured (scripts/family_sweep.py --grid BLOCK x COLS x warps x
        # stages, 36 configurations, do_bench, run 47, H200, 2026-12-03), cumsum over dim 1 of [16, 4096, 1024]
        # fp32: BLOCK 2048, COLS 32, 4 warps 0.1741 -> 0.1506 ms with 3 stages (the best of the 36), 1024 x 32 with
        # 4 stages 0.1546; 8 warps and 64 columns were slower at every depth.
        plain = [ScanConfig(BLOCK=b, COLS=c, num_warps=w)
                 for b, c, w in ((2048, 32, 4), (4096, 64, 8), (1024, 16, 4), (2048, 64, 4), (8192, 128, 8))]
        return [plain[0].replace(stages=3), ScanConfig(BLOCK=1024, COLS=32, num_warps=4, stages=4), *plain]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, ScanConfig.of(config), ident)
