"""The recurrent family: claims an LSTM, GRU or plain RNN layer stack with the getitems of its outputs; its
configurations are the scan's tile sizes."""

from __future__ import annotations

from kernelwright.generate.families.base import DEFAULT_POLICY, Config, Group, Policy, Rendered, make_group
from kernelwright.generate.families.recurrent.config import RecurrentConfig
from kernelwright.generate.families.recurrent.matching import match_recurrent
from kernelwright.generate.families.recurrent.writing import write
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph

NAME = "recurrent"



@register
class RecurrentFamily:
    name = NAME
    priority = 80  # claim order: a recurrent layer stack is one node of its own

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        rnn = match_recurrent(graph, node, claimed)
        if rnn is None:
            return None
        return make_group(graph, NAME, rnn.members, anchor=node.name, rnn=rnn)

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # The scan is latency-bound: every step waits for the last. Split: a batch block's hidden units shared by
        # up to H / BLOCK_H programs (one an SM), which meet at a barrier after each step; unsplit: one program a
        # batch block walks them all (no barrier; the CPU's interpreter always runs this way). Resident: a split
        # program holding its W_hh block in registers for every step (no W_hh loads in the time loop).
        # Measured (kernelwright bench, run 39, H200, 2026-12-03; level 3 36_LSTMHn: batch 10, 512 steps, hidden
        # 256, 6 layers): split BLOCK_H 16 61.9 ms, BLOCK_H 32 116.1 ms (cuDNN: 34.8 ms) — more programs a step
        # win, so the narrowest block leads. Resident (8 warps) 112.1 ms (family_sweep, run 40): W_hh's block in
        # registers did not pay, so it follows the split ones.
        resident = [RecurrentConfig(BLOCK_B=16, BLOCK_H=16, BLOCK_K=64, num_warps=w, split=True, resident=True)
                    for w in (8, 4)]
        split = [RecurrentConfig(BLOCK_B=16, BLOCK_H=bh, BLOCK_K=bk, num_warps=w, split=True)
                 for bh, bk, w in ((16, 64, 4), (16, 128, 4), (32, 64, 4))]
        whole = [RecurrentConfig(BLOCK_B=16, BLOCK_H=bh, BLOCK_K=bk, num_warps=w, split=False)
                 for bh, bk, w in ((64, 64, 4), (128, 32, 8))]
        return [*split, *resident, *whole]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, RecurrentConfig.of(config), ident)
