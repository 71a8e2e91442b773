"""What a GEMM group absorbs after the matmul: views of the result and every pointwise node of the tile's shape
that reads it (a DAG, so ``silu = x * sigmoid(x)`` fuses too), the pointwise nodes that only compute such an
operand (``beta * c``), the constants only the epilogue reads, and index values (``arange``s and their sums and
views: the mask of ``triu(a @ b)``), computed from the tile's coordinates instead of read."""

from __future__ import annotations

from kernelwright.generate.families.base import broadcastable, depends_on, fusable_pointwise
from kernelwright.generate.families.gemm.matching import GLUE_RESHAPES, Matmul
from kernelwright.generate.families.gemm.model import Dim, GemmPlan, dim_size, regroup
from kernelwright.generate.families.symbolic import index_form
from kernelwright.generate.graph import ProblemGraph, node_inputs
from kernelwright.generate.operators import CONSTANTS


def grow(graph: ProblemGraph, mm: Matmul, claimed: set[str]) -> tuple[GemmPlan, list[str]]:
    """What the group computes and its member nodes."""
    anchor, a_glue, b_glue, bias = mm.anchor, mm.a_glue, mm.b_glue, mm.bias
    operand_levels: dict[str, tuple[Dim, ...]] = {}
    if bias is not None:
        operand_levels[bias] = mm.out_dims
    # The epilogue: views of the result and pointwise nodes of its shape reading it, grown in graph order.
    tile = {anchor.name}
    levels: dict[str, tuple[Dim, ...]] = {anchor.name: mm.out_dims}
    epilogue: list[str] = []
    memo: dict[str, bool] = {}
    for node in graph.nodes[graph.nodes.index(anchor) + 1:]:
        if node.name in claimed or node.info is None:
            continue
        inputs = node_inputs(node)
        inside = [v for v in inputs if v in tile]
        if not inside:
            continue
        if node.op in GLUE_RESHAPES and inputs == inside:
            if node.info.dtype != graph.info(inside[0]).dtype:
                continue  # view(x, dtype): a reinterpretation
            new = regroup(levels[inside[0]], node.info.shape)
            if new is None:
                continue
            level = tuple(new)
        elif fusable_pointwise(node) and node.op not in CONSTANTS:
            level = levels[inside[0]]
            if any(levels[v] != level for v in inside) or tuple(dim_size(d) for d in level) != node.info.shape:
                continue
            outside = [v for v in inputs if v not in tile and v in graph.values]
            if any(not broadcastable(graph.info(v).shape, node.info.shape)
                   or operand_levels.get(v, level) != level or v in a_glue or v in b_glue
                   or depends_on(graph, v, tile, memo) for v in outside):
                continue
            operand_levels.update((v, level) for v in outside)
        else:
            continue
        tile.add(node.name)
        levels[node.name] = level
        epilogue.append(node.name)
        memo = {}
    producers = _absorb_producers(graph, operand_levels, claimed, tile, keep={bias})
    # Constants only the epilogue reads are inlined rather than loaded.
    readers = tile | set(producers)
    constants = [n.name for n in graph.nodes if n.op in CONSTANTS and n.name not in claimed
                 and n.name in operand_levels and all(u in readers for u in graph.users.get(n.name, []))]
    for name in constants:
        del operand_levels[name]
    indices, index_nodes = _index_operands(graph, operand_levels, levels[anchor.name], claimed,
                                           readers | set(constants), keep={bias})
    plan = GemmPlan(anchor=anchor.name, batched=mm.rank == 3, a=mm.a, b=mm.b, bias=bias, alpha=mm.alpha,
                    beta=mm.beta, epilogue=tuple(epilogue), producers=tuple(producers), constants=tuple(constants),
                    levels=levels, operand_levels=operand_levels, indices=indices, resolved=mm.resolved)
    return plan, [*a_glue, *b_glue, anchor.name, *epilogue, *producers, *constants, *index_nodes]


def _index_operands(graph: ProblemGraph, operand_levels: dict[str, tuple[Dim, ...]], tile: tuple[Dim, ...],
                    claimed: set[str], readers: set[str], keep: set[str | None]
                    ) -> tuple[dict[str, tuple[int, int, float]], list[str]]:
    """Epilogue operands that are affine functions of the tile's row and column (``arange(M)[:, None]``, ``j - i``)
    and that nothing but the group reads: ``{operand: (row coefficient, column coefficient, constant)}`` and the
    nodes computing them, which join the group (the kernel computes the values from its coordinates; PyTorch
    makes no index tensor)."""
    indices: dict[str, tuple[int, int, float]] = {}
    nodes: list[str] = []
    for value in list(operand_levels):
        if value in keep or operand_levels[value] != tile or value in graph.outputs:
            continue
        form = index_form(graph, value)
        if form is None:
            continue
        coef, const, sources = form
        inside = readers | sources
        if set(coef) - {0, 1} or sources & claimed or any(
                n in graph.outputs or not all(u in inside for u in graph.users.get(n, [])) for n in sources):
            continue
        del operand_levels[value]
        indices[value] = (coef.get(1, 0), coef.get(0, 0), const)
        nodes += [n for n in sources if n not in nodes]
    return indices, nodes


def _absorb_producers(graph: ProblemGraph, operand_levels: dict[str, tuple[Dim, ...]], claimed: set[str],
                      tile: set[str], keep: set[str | None]) -> list[str]:
    """Pointwise nodes that only compute an epilogue operand (``beta * c`` of a decomposed ``baddbmm``, a
    scaled residual) are computed on the tile too, from their own inputs: no kernel or round trip of their
    own."""
    producers: list[str] = []
    grew = True
    while grew:
        grew = False
        for value in list(operand_levels):
            level = operand_levels[value]
            shape = tuple(dim_size(d) for d in level)
            try:
                node = graph.node(value)
            except KeyError:
                continue  # a placeholder
            if value in keep or node.name in claimed or value in graph.outputs or node.info is None or \
                    not fusable_pointwise(node) or node.op in CONSTANTS or \
                    not all(u in tile for u in graph.users.get(value, [])) or \
                    not broadcastable(node.info.shape, shape):
                continue
            inputs = [v for v in node_inputs(node) if v in graph.values]
            if any(not broadcastable(graph.info(v).shape, shape) or operand_levels.get(v, level) != level
                   or v in tile for v in inputs):
                continue
            del operand_levels[value]
            operand_levels.update((v, level) for v in inputs)
            producers.append(value)
            tile = tile | {value}
            grew = True
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    return sorted(producers, key=order.__getitem__)
