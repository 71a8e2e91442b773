"""What an attention group absorbs beyond its core: the casts and layout copies after the output (written by the
kernel directly), and the constants of the mask and the scale that nothing else uses."""

from __future__ import annotations

from kernelwright.generate.families.attention.matching import (
    Core,
    cast_target,
    compose,
    permutation,
    sole_user,
)
from kernelwright.generate.graph import ProblemGraph
from kernelwright.generate.operators import CASTS, COPIES


def absorb(graph: ProblemGraph, core: Core, claimed: set[str]) -> tuple[set[str], tuple[int, ...] | None, str]:
    """The group's members, the permutation of [*batch, L, Dv] the output is allocated in (None: as is), and the
    group's output value."""
    tail, out_perm, output = _tail(graph, core.core_out, claimed | set(core.members))
    members = set(core.members) | set(tail)
    constants = set(core.constants) - members
    members |= constants
    # A constant also used outside is left to PyTorch (its value then comes in, unused by the kernel).
    changed = True
    while changed:
        changed = False
        for name in list(constants):
            if name in graph.outputs or any(u not in members for u in graph.users.get(name, [])):
                members.discard(name)
                constants.discard(name)
                changed = True
    return members, out_perm, output


def _tail(graph: ProblemGraph, core_out: str, claimed: set[str]) -> tuple[list[str], tuple[int, ...] | None, str]:
    """Casts and layout copies after the output (SDPA's decomposition ends in permute → clone → permute to give
    the output the layout the fused kernels return): written by the kernel directly. Returns the absorbed
    nodes, the permutation of [*batch, L, Dv] the output is allocated in, and the group's output value."""
    rank = len(graph.info(core_out).shape)
    absorbed: list[str] = []
    pending: list[str] = []
    perm = tuple(range(rank))
    pending_perm = perm
    cur = core_out
    while True:
        node = sole_user(graph, cur)
        if node is None or node.name in claimed or node.info is None:
            break
        if node.op in CASTS and cast_target(node) is not None:
            absorbed += pending + [node.name]
            pending, perm = [], pending_perm
        elif node.op in ("permute", "transpose"):
            dims = permutation(node, rank)
            if dims is None:
                break
            pending.append(node.name)
            pending_perm = compose(pending_perm, dims)
        elif node.op in COPIES:
            absorbed += pending + [node.name]
            pending, perm = [], pending_perm
        else:
            break
        cur = node.name
    output = absorbed[-1] if absorbed else core_out
    return absorbed, (perm if perm != tuple(range(rank)) else None), output

