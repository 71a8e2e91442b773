"""The reduction family: claims a reduction anchor and the group grown around it; its configurations are
strategies (whole rows in registers, rows walked in chunks, rows split into shares) with tile sizes and warps."""

from __future__ import annotations

from typing import Any

from kernelwright.generate import expr
from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    make_group,
    next_pow2,
    planning_arch,
    sm_count,
)
from kernelwright.generate.families.reduction.body import BodyWriter
from kernelwright.generate.families.reduction.growing import Grower, validate
from kernelwright.generate.families.reduction.matching import match_anchor
from kernelwright.generate.families.reduction.model import FULL, NAME, Spec
from kernelwright.generate.families.reduction.writing import write
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph
from kernelwright.hardware import arch_spec

# Rows up to this many elements are held in registers by default (strategy "single"): 16K fp32 values over 16
# warps is 32 registers a thread. A lead from the usual Triton practice, not yet measured on the H200.
SINGLE_MAX = 16384
# Strategy split aims at this many programs per SM, rounded down to a power of two over the arch's SMs (1,024 on
# an H100/H200's 132): enough loads in flight to stream at full bandwidth when the outputs are few. A lead, not yet
# measured.
SPLIT_PROGRAMS_PER_SM = 8


def split_programs(arch: str) -> int:
    """The split strategy's program count for ``arch``, from the hardware knowledge base's SM count."""
    return 1 << (SPLIT_PROGRAMS_PER_SM * sm_count(arch)).bit_length() - 1


def _warps(elements: int, lo: int = 1, hi: int = 16) -> int:
    """About 16 fp32 values a thread: enough bytes in flight without spilling (a lead, not yet measured)."""
    return max(lo, min(hi, next_pow2(max(elements // 512, 1))))


@register
class ReductionFamily:
    name = NAME
    priority = 40  # claim order: after the matmul-like anchors, which absorb a reduction's neighbours first

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        anchor = match_anchor(graph, node, claimed)
        if anchor is None:
            return None
        spec = Spec(layout=anchor.layout, anchor=node.name)
        spec.add(anchor.ops, anchor.members)
        Grower(graph, spec, claimed).grow()
        group = make_group(graph, NAME, spec.members, anchor=node.name, spec=spec)
        if not validate(graph, spec, group):
            return None
        try:  # every configuration must render; a gap found here leaves the nodes to PyTorch, not a crash
            for config in self.space(graph, group, planning_arch(arch)):
                self.render(graph, group, config, "probe")
        except (AssertionError, KeyError, expr.Unsupported):
            return None
        return group

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Reductions accumulate in fp32 whatever the policy allows: the policy changes nothing here.
        spec: Spec = group.detail["spec"]
        max_warps = max(1, min(32, arch_spec(arch).max_threads_per_block // 32))
        _, n_red, n_inner = spec.layout.sizes()
        p = next_pow2(n_red)
        configs: list[dict[str, Any]] = []

        def add(strategy: str, warps: int, **sizes: int | None) -> None:
            config = {"strategy": strategy, **sizes, "num_warps": max(1, min(warps, max_warps))}
            if config not in configs:
                configs.append(config)

        if spec.layout.kind == "strided":
            # Outputs along the contiguous inner dim (64 fp32 = 256 B per reduced index, coalesced); the chunk of
            # the reduced dim fills the tile.
            bm = min(next_pow2(n_inner), 64)
            chunk = min(max(4096 // bm, 1), max(p // 4, 1))
            if p * bm <= 8192:
                add("single", _warps(p * bm, 1, 8), block_m=bm, block_n=None)
            add("loop", _warps(bm * chunk, 1, 8), block_m=bm, block_n=chunk)
            add("loop", _warps(min(bm, 32) * chunk * 2, 1, 8), block_m=min(bm, 32), block_n=chunk * 2)
            add("loop", _warps(min(bm * 2, 128) * chunk, 1, 8), block_m=min(bm * 2, 128), block_n=chunk)
            return self._with_split(graph, group, configs, arch)

        # Rows: whole in registers when they fit (short rows pack several per program: `tile` elements), else
        # walked in chunks. The second entry is always the other strategy.
        # A loop chunk is at most 4096 elements (a quarter row for shorter rows); short rows pack into a
        # 1024-element tile.
        chunk = min(4096, max(16, p // 4))
        tile = max(p, 4096)
        if p <= SINGLE_MAX:
            add("single", _warps(tile), tile=tile, block_n=None)
            add("loop", _warps(max(chunk, 1024), 1, 8), tile=max(chunk, 1024), block_n=chunk)
            add("single", _warps(tile) * 2, tile=tile, block_n=None)
            add("single", max(_warps(tile) // 2, tile // (32 * 64)), tile=tile, block_n=None)
            add("loop", _warps(max(chunk * 2, 1024), 1, 16), tile=max(chunk * 2, 1024), block_n=chunk * 2)
        else:
            add("loop", 8, tile=4096, block_n=4096)
            if p <= 2 * SINGLE_MAX and spec.layout.kind != "group":
                # a lead: 32 values a thread over 1024 threads (GroupNorm's per-element channel index spills here)
                add("single", 32, tile=p, block_n=None)
            add("loop", 4, tile=2048, block_n=2048)
            add("loop", 16, tile=8192, block_n=8192)
        return self._with_split(graph, group, configs, arch)

    def _with_split(self, graph: ProblemGraph, group: Group, configs: list[dict[str, Any]], arch: str
                    ) -> list[Config]:
        """Add strategy split where it applies (one pass, per-row outputs only): first when the other strategies
        would leave the arch's SMs idle (fewer than two programs each; the count from the hardware knowledge base)
        over long rows, else third while it would still raise the number of programs. A lead from the SM count, not
        yet timed."""
        spec: Spec = group.detail["spec"]
        writer = BodyWriter(graph, group, spec, {"strategy": "loop"})
        if any(writer.phase(op.deps[0]) for op in spec.ops if op.kind == "reduce") or \
                any(spec.level(o) == FULL for o in group.outputs):
            return configs
        loop = next(c for c in configs if c["strategy"] == "loop")
        n_outer, n_red, n_inner = spec.layout.sizes()
        block_n = min(loop["block_n"], next_pow2(n_red))
        if spec.layout.kind == "strided":
            programs = n_outer * -(-n_inner // min(loop["block_m"], next_pow2(n_inner)))
        else:
            programs = -(-n_outer // max(loop["tile"] // block_n, 1))
        split = {**loop, "strategy": "split", "programs": split_programs(arch)}
        splits = [split]
        if spec.layout.kind == "strided" and next_pow2(n_inner) > split["block_m"]:
            # Wider along the contiguous dim: 256 outputs a program (1 KiB of fp32 a reduced index) instead of 64.
            # Measured (scripts/family_sweep.py --grid, do_bench, H200, 2026-12-02, run 30): min over dim 0 of
            # [8192, 4096] fp32 0.0862 -> 0.0556 ms (block_n 64, 1024 programs; best of 18 configurations), sum over
            # dim 1 of [64, 4096, 256] 0.0937 -> 0.0794 ms (best 0.0781 at block_m 64, block_n 16).
            splits.insert(0, {**split, "block_m": min(next_pow2(n_inner), 256)})
            # Fewer registers a program, more programs an SM: Inductor's min_dim0 kernel (scripts/inductor_code.py,
            # run 46, H200, 2026-12-03) reduced 32 shares of 256 rows in 32.2 us against our 43.0 us partial
            # kernel (a [64 x 256] tile over 8 warps, one program an SM). Swept (family_sweep.py --grid block_m x
            # block_n x warps x programs x stages, 48 configurations, do_bench, the better of two passes, run 47):
            # 64 columns x 64 (or 16) rows over 4 warps and 1,024 programs led at 0.0478 (0.0480) ms; Inductor's
            # shape (64 x 8, 2,048 programs) 0.0502; the same 64 x 64 tile over 8 warps 0.0615 (0.0508 pipelined
            # 3 stages deep); the wide tile above 0.0555. Through the verifier (run 48) the 64 x 64, 4-warp split
            # won at 0.0472 (the wide one: 0.0552 in run 33): first.
            narrow = [{**split, "block_m": min(next_pow2(n_inner), 64), "num_warps": 4},
                      {**split, "block_m": min(next_pow2(n_inner), 64), "block_n": min(16, next_pow2(n_red)), "num_warps": 4}]
            splits = [*narrow, *(c for c in splits if c not in narrow)]
            splits = [c for i, c in enumerate(splits) if c not in splits[:i]]
        if programs < 2 * sm_count(arch) and n_red >= 4 * block_n:
            return [*splits, *configs]
        if programs < split["programs"]:
            return [*configs[:2], *splits, *configs[2:]]
        return configs

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, config, ident)
