"""A reduction group grown around its anchor: pointwise consumers (full-shape or per row), further reductions over
the same rows, sibling reductions of the same input, gathers along the reduced dimension, views of per-row values,
and the pointwise producers whose every use is inside."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import Group, broadcastable, depends_on, fusable_pointwise
from kernelwright.generate.families.reduction.matching import ANCHORS
from kernelwright.generate.families.reduction.model import (
    CONST,
    FULL,
    VEC,
    Layout,
    Op,
    Spec,
    operand_ok,
    vec_class,
)
from kernelwright.generate.graph import Node, ProblemGraph, Ref, node_inputs
from kernelwright.generate.operators import CONSTANTS, EXPANDS, RESHAPES, UNIT_DIMS

# Views a group follows: they add or drop size-1 dimensions of per-row values (or re-describe a full tile).
VIEW_OPS = RESHAPES | UNIT_DIMS | EXPANDS | {"alias"}


def _emittable(graph: ProblemGraph, node: Node) -> bool:
    """Whether the pointwise emitter writes this node with these arguments."""
    env = {v: expr.Value(f"t_{v}", expr.compute_dtype(graph.info(v).dtype)) for v in node_inputs(node)
           if v in graph.values}
    try:
        expr.PointwiseEmitter("t").emit(node, env)
    except (expr.Unsupported, KeyError, TypeError, ValueError):
        return False
    return True


class Grower:
    """Grows a group's :class:`Spec` around its anchor, in graph order, until nothing more joins."""

    def __init__(self, graph: ProblemGraph, spec: Spec, claimed: set[str]) -> None:
        self.graph, self.spec, self.claimed = graph, spec, claimed

    @property
    def layout(self) -> Layout:
        return self.spec.layout

    def _free(self, node: Node) -> bool:
        return node.name not in self.claimed and node.name not in self.spec.members

    def _no_cycle(self, outside: Iterable[str]) -> bool:
        members, memo = set(self.spec.members), {}
        return not any(depends_on(self.graph, v, members, memo) for v in outside)

    def grow(self) -> None:
        anchor_index = next(i for i, n in enumerate(self.graph.nodes) if n.name == self.spec.anchor)
        changed = True
        while changed:
            changed = False
            for node in self.graph.nodes[anchor_index + 1:]:
                if self._free(node) and any(self.spec.has(v) for v in node_inputs(node)):
                    changed |= self.consumer(node)
                elif self._free(node) and node.op in ANCHORS:
                    changed |= self.sibling(node)
            for value in self.spec.outside():
                changed |= self.producer(value)

    # -- consumers: pointwise epilogues, views, further reductions, gathers ---------------------------------------
    def consumer(self, node: Node) -> bool:
        graph, spec, layout = self.graph, self.spec, self.layout
        inputs = node_inputs(node)
        outside = [v for v in inputs if not spec.has(v)]
        if node.op in ANCHORS:  # (multi-output anchors have no info of their own: their getitems do)
            anchor = ANCHORS[node.op](graph, node)
            if anchor is None or anchor.layout != layout or not spec.has(inputs[0]) or \
                    spec.level(inputs[0]) != FULL or not self._no_cycle(outside):
                return False
            if not all(operand_ok(graph, layout, v, FULL) for v in outside):
                return False
            spec.add(anchor.ops, anchor.members)
            return True
        if node.info is None:
            return False
        shape = tuple(node.info.shape)
        if node.op == "gather":
            return self._gather(node, outside)
        if node.op in VIEW_OPS:
            source = inputs[0] if inputs else None
            if source is None or not spec.has(source):
                return False
            level = spec.level(source)
            if (level == VEC and shape in layout.vec_forms) or (level == FULL and shape == layout.shape):
                spec.add([Op(name=node.name, level=level, kind="alias", deps=(source,))], [node.name])
                return True
            if node.op == "expand" and level == VEC and shape == layout.shape and layout.kind != "group":
                # a per-row value spread over the full shape: the tile broadcasts it anyway
                spec.add([Op(name=node.name, level=FULL, kind="alias", deps=(source,))], [node.name])
                return True
            return False
        if not fusable_pointwise(node) or node.op in CONSTANTS or not _emittable(graph, node):
            return False
        levels = {spec.level(v) for v in inputs if spec.has(v)}
        if FULL in levels:
            level = FULL if shape == layout.shape else None
        elif shape in layout.vec_forms:
            level = VEC
        elif shape == layout.shape:
            level = FULL
        else:
            level = None
        if level is None or levels <= {CONST}:
            return False
        if not all(operand_ok(graph, layout, v, level) for v in outside) or not self._no_cycle(outside):
            return False
        spec.add([Op(name=node.name, level=level, kind="node", deps=tuple(inputs), node=node.name)], [node.name])
        return True

    def sibling(self, node: Node) -> bool:
        """Another reduction of an input the group already reads whole, over the same rows (x.mean() and x.var(),
        amax and argmax): computed in the same pass, so the input is read once."""
        graph, spec = self.graph, self.spec
        inputs = node_inputs(node)
        if not inputs or spec.has(inputs[0]) or FULL not in spec.uses(inputs[0]) or \
                tuple(graph.info(inputs[0]).shape) != self.layout.shape:
            return False
        anchor = ANCHORS[node.op](graph, node)
        if anchor is None or anchor.layout != self.layout or any(not self._free(graph.node(m)) for m in anchor.members):
            return False
        outside = [v for v in inputs if not spec.has(v)]
        if not all(operand_ok(graph, self.layout, v, FULL) for v in outside) or not self._no_cycle(outside):
            return False
        spec.add(anchor.ops, anchor.members)
        return True

    def _gather(self, node: Node, outside: list[str]) -> bool:
        graph, spec, layout = self.graph, self.spec, self.layout
        source, dim, index = (node.args + (None,) * 3)[:3]
        if not (isinstance(source, Ref) and isinstance(index, Ref) and isinstance(dim, int)):
            return False
        if node.kwargs.get("sparse_grad") or layout.kind == "group" or layout.stop - layout.start != 1:
            return False
        if not spec.has(source.name) or spec.level(source.name) != FULL or dim % layout.rank != layout.start:
            return False
        if index.name not in graph.values or graph.info(index.name).dtype not in (torch.int64, torch.int32):
            return False
        if tuple(graph.info(index.name).shape) != layout.keep_shape or tuple(node.info.shape) != layout.keep_shape:
            return False
        if spec.has(index.name):
            if spec.level(index.name) != VEC:
                return False
        elif not operand_ok(graph, layout, index.name, VEC):
            return False
        if not self._no_cycle(outside):
            return False
        spec.add([Op(name=node.name, level=VEC, kind="gather", deps=(source.name, index.name))], [node.name])
        return True

    # -- producers: pointwise nodes whose every use is inside the group -----------------------------------------
    def producer(self, value: str) -> bool:
        graph, spec, layout = self.graph, self.spec, self.layout
        try:
            node = graph.node(value)
        except KeyError:
            return False  # a placeholder
        users = graph.users.get(value, [])
        if not self._free(node) or value in graph.outputs or node.info is None or \
                not all(u in spec.members for u in users):
            return False
        levels = spec.uses(value)
        shape = tuple(node.info.shape)
        inputs = node_inputs(node)
        if node.op in CONSTANTS:
            if not _emittable(graph, node) or "special" in levels:
                return False
            spec.add([Op(name=value, level=CONST, kind="node", deps=tuple(inputs), node=value)], [value])
            return True
        if len(levels) != 1 or not self._no_cycle(inputs):
            return False
        (level,) = levels
        if node.op in VIEW_OPS:
            if level != VEC or shape not in layout.vec_forms or not inputs or \
                    vec_class(layout, graph.info(inputs[0]).shape) != "vec":
                return False
            spec.add([Op(name=value, level=VEC, kind="alias", deps=(inputs[0],))], [value])
            return True
        if not fusable_pointwise(node) or not _emittable(graph, node):
            return False
        if level == FULL and not broadcastable(shape, layout.shape):
            return False
        if level == VEC and vec_class(layout, shape) is None:
            return False
        if not all(operand_ok(graph, layout, v, level) for v in inputs):
            return False
        spec.add([Op(name=value, level=level, kind="node", deps=tuple(inputs), node=value)], [value])
        return True


def validate(graph: ProblemGraph, spec: Spec, group: Group) -> bool:
    """Whether the kernel can write every output of the grown group, and read the sizes from one of its inputs."""
    layout = spec.layout
    for o in group.outputs:
        info = graph.values.get(o)
        if info is None or info.dtype not in expr.TL_DTYPE or not spec.has(o):
            return False
        level = spec.level(o)
        if (level == FULL and tuple(info.shape) != layout.shape) or \
                (level == VEC and tuple(info.shape) not in layout.vec_forms) or level == CONST:
            return False
    # The launcher reads the sizes from a full-shape input.
    return any(tuple(graph.info(v).shape) == layout.shape and FULL in spec.uses(v) for v in group.inputs)

