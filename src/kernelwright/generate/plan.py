"""Splitting the captured graph into groups, one template family each; what no family claims stays in PyTorch."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from kernelwright.generate.families.base import Family, Group
from kernelwright.generate.graph import Node, ProblemGraph, Ref
from kernelwright.generate.operators import FREE

log = logging.getLogger(__name__)

def load_families(names: Sequence[str] | None = None) -> list[Family]:
    """The template families (``names``: only these), in claim order: each registers itself where it is defined
    with its claim priority (generate/families/registry.py). A family that fails to import is an error naming it."""
    from kernelwright.generate.families.registry import families

    return [family for family in families() if names is None or family.name in names]


@dataclass(frozen=True, kw_only=True)
class Plan:
    graph: ProblemGraph
    groups: tuple[Group, ...]
    uncovered: tuple[str, ...]  # nodes left to PyTorch that do real work (views and getitems excluded)

    @property
    def fully_covered(self) -> bool:
        return not self.uncovered

    @property
    def own_work(self) -> float:
        """The share of the reference's work the groups do (1.0 when nothing that works is left to PyTorch):
        multiply-adds for matmuls, convolutions and attention, one operation per output element elsewhere
        (:func:`node_work`)."""
        left = set(self.uncovered)
        work = {n.name: node_work(self.graph, n) for n in self.graph.nodes if n.op not in FREE}
        total = sum(work.values())
        return 1.0 if total <= 0 else 1.0 - sum(w for name, w in work.items() if name in left) / total

    def describe(self, *, share: bool = True) -> list[str]:
        """One line a group, then what is left to PyTorch — with the share of the work it is unless ``share`` is
        off (a generated file leaves it out: the share follows the sizes, and a candidate proven at reduced sizes
        must be the same file as at the problem's own)."""
        lines = [f"group {i}: {g.family} — {', '.join(self.graph.node(n).op for n in g.nodes)}"
                 for i, g in enumerate(self.groups)]
        if self.uncovered:
            ops = sorted({self.graph.node(n).op for n in self.uncovered})
            left = f"left to PyTorch: {', '.join('aten.' + o for o in ops)}"
            if share:
                rest = 1.0 - self.own_work
                left += f" ({_percent(rest)} of the work; own kernels {_percent(1.0 - rest)})"
            lines.append(left)
        return lines


def _percent(share: float) -> str:
    """A share as a percentage that says 'some' for a small one (0.3%, not 0%) and never rounds 99.7% to 100%."""
    value = 100 * share
    if 0 < value < 1:
        return f"{value:.1g}%"
    if 99 < value < 100:
        return f"{min(math.floor(value * 10) / 10, 99.9):.1f}%"
    return f"{value:.0f}%"


def node_work(graph: ProblemGraph, node: Node) -> float:
    """An estimate of a node's work from its shapes: 2 x multiply-adds for the contractions (matmuls, convolutions,
    attention), else one operation per output element (or per element of its first input, for a node of several
    outputs). Enough to say how much of a problem the templates leave to PyTorch, not a roofline."""
    shapes = [graph.info(a.name).shape for a in node.args if isinstance(a, Ref) and a.name in graph.values]
    out = node.info.shape if node.info is not None else (shapes[0] if shapes else ())
    if node.op in ("mm", "bmm", "addmm", "baddbmm", "matmul") and len(shapes) >= 2:
        k = shapes[-1][-2] if len(shapes[-1]) >= 2 else 1
        return 2.0 * math.prod(out) * k
    if node.op == "convolution" and len(shapes) >= 2:
        weight, transposed = shapes[1], bool(node.args[6]) if len(node.args) > 6 else False
        if transposed:  # every input element meets [C_out / groups, *taps] weights
            return 2.0 * math.prod(shapes[0]) * math.prod(weight[1:])
        return 2.0 * math.prod(out) * math.prod(weight[1:])  # every output element: [C_in / groups, *taps]
    if node.op.startswith("_scaled_dot_product") and len(shapes) >= 3:
        q, k = shapes[0], shapes[1]
        return 4.0 * math.prod(q) * k[-2]  # QK^T and PV: 2 x (L x S x D) multiply-adds a head
    return float(math.prod(out))


def convex(graph: ProblemGraph, members: Sequence[str]) -> bool:
    """Whether no path leaves the group and comes back into it. A kernel runs all its nodes at once, so a node
    outside that needs one member and feeds another would make the kernel wait on itself (a backward's swiglu
    chain once absorbed a multiply on both sides of a reduction); with every group convex, groups and PyTorch
    nodes can always be put in an order."""
    inside = set(members)
    frontier = [u for m in inside for u in graph.users.get(m, []) if u not in inside]
    seen: set[str] = set()
    while frontier:
        name = frontier.pop()
        if name in seen:
            continue
        seen.add(name)
        for user in graph.users.get(name, []):
            if user in inside:
                return False
            frontier.append(user)
    return True


def plan(graph: ProblemGraph, families: Sequence[Family] | None = None, *, arch: str | None = None) -> Plan:
    """The groups the families claim, in claim order, for ``arch`` (None: the configured target arch)."""
    families = list(families) if families is not None else load_families()
    claimed: set[str] = set()
    groups: list[Group] = []
    for family in families:
        for node in graph.nodes:
            if node.name in claimed:
                continue
            group = family.claim(graph, node, claimed, arch)
            if group is None:
                continue
            if not convex(graph, group.nodes):
                log.info("%s group at %s left out: a path leaves it and comes back (it would wait on itself)",
                         family.name, node.name)
                continue
            groups.append(group)
            claimed.update(group.nodes)
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    groups.sort(key=lambda g: order[g.nodes[0]])
    uncovered = tuple(n.name for n in graph.nodes if n.name not in claimed and n.op not in FREE)
    return Plan(graph=graph, groups=tuple(groups), uncovered=uncovered)
