"""Splitting the captured graph into groups, one template family each; what no family claims stays in PyTorch."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kernelwright.generate.families.base import Family, Group
from kernelwright.generate.graph import ProblemGraph
from kernelwright.generate.operators import FREE

log = logging.getLogger(__name__)

# Claim order: the families whose anchors bound the problem first (they absorb their prologues and epilogues),
# pointwise last (it takes what is left). Module path : class name.
FAMILY_CLASSES = (
    "kernelwright.generate.families.attention:AttentionFamily",
    "kernelwright.generate.families.gemm:GemmFamily",
    "kernelwright.generate.families.conv:ConvFamily",
    "kernelwright.generate.families.reduction:ReductionFamily",
    "kernelwright.generate.families.scan:ScanFamily",
    "kernelwright.generate.families.pool:PoolFamily",
    "kernelwright.generate.families.batchnorm:BatchNormFamily",
    "kernelwright.generate.families.pointwise:PointwiseFamily",
)

def load_families(names: Sequence[str] | None = None) -> list[Family]:
    """The template families, in claim order (those not importable are skipped, with a log line)."""
    families: list[Family] = []
    for spec in FAMILY_CLASSES:
        module_name, _, cls_name = spec.partition(":")
        try:
            family = getattr(importlib.import_module(module_name), cls_name)()
        except (ImportError, AttributeError) as exc:
            log.info("template family %s unavailable: %s", spec, exc)
            continue
        if names is None or family.name in names:
            families.append(family)
    return families


@dataclass(frozen=True, kw_only=True)
class Plan:
    graph: ProblemGraph
    groups: tuple[Group, ...]
    uncovered: tuple[str, ...]  # nodes left to PyTorch that do real work (views and getitems excluded)

    @property
    def fully_covered(self) -> bool:
        return not self.uncovered

    def describe(self) -> list[str]:
        lines = [f"group {i}: {g.family} — {', '.join(self.graph.node(n).op for n in g.nodes)}"
                 for i, g in enumerate(self.groups)]
        if self.uncovered:
            ops = sorted({self.graph.node(n).op for n in self.uncovered})
            lines.append(f"left to PyTorch: {', '.join('aten.' + o for o in ops)}")
        return lines


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
