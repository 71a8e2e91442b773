"""Writing a candidate: one self-contained KernelBench ``ModelNew`` file a person can read.

The file holds the problem's own imports and constants, the rendered kernels and launchers of every group, and a
``ModelNew`` whose ``__init__`` is the reference's (same parameters, same order, so the same weights under the same
seed) and whose ``forward`` calls the launchers in dependency order, with PyTorch for whatever no template covers.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from kernelwright.generate.families.base import Config, Family, Rendered
from kernelwright.generate.graph import Node, Ref, node_inputs
from kernelwright.generate.plan import Plan

HEADER_IMPORTS = """\
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl
"""


def _fmt(value: Any) -> str:
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return "_device"
    if isinstance(value, (torch.memory_format, torch.layout)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _aten_call(node: Node) -> str:
    if node.target is operator.getitem:
        return f"{_fmt(node.args[0])}[{_fmt(node.args[1])}]"
    target = str(node.target)  # "aten.add.Tensor"
    args = [_fmt(a) for a in node.args] + [f"{k}={_fmt(v)}" for k, v in node.kwargs.items()]
    return f"torch.ops.{target}({', '.join(args)})"


def _schedule(plan: Plan) -> list[tuple[str, Any]]:
    """Groups and PyTorch nodes in an order that respects every dependency (graph order where free)."""
    graph = plan.graph
    owner: dict[str, int] = {n: i for i, g in enumerate(plan.groups) for n in g.nodes}
    items: list[tuple[str, Any]] = []
    seen_groups: set[int] = set()
    for node in graph.nodes:
        if node.name in owner:
            index = owner[node.name]
            if index not in seen_groups:
                seen_groups.add(index)
                items.append(("group", index))
        else:
            items.append(("node", node.name))

    def produces(item: tuple[str, Any]) -> set[str]:
        return set(plan.groups[item[1]].nodes) if item[0] == "group" else {item[1]}

    def needs(item: tuple[str, Any]) -> set[str]:
        if item[0] == "group":
            return set(plan.groups[item[1]].inputs)
        return set(node_inputs(graph.node(item[1])))

    ordered: list[tuple[str, Any]] = []
    available = set(graph.values) - {n.name for n in graph.nodes}  # placeholders
    pending = list(items)
    while pending:
        for i, item in enumerate(pending):
            if needs(item) <= available | produces(item):
                ordered.append(item)
                available |= produces(item)
                del pending[i]
                break
        else:
            raise RuntimeError("the plan's groups depend on each other in a cycle")
    return ordered


def emit(plan: Plan, families: Mapping[str, Family], configs: Sequence[Config], *, title: str) -> str:
    """The candidate's source. ``configs[i]`` configures ``plan.groups[i]``."""
    graph = plan.graph
    rendered: list[Rendered] = []
    for i, (group, config) in enumerate(zip(plan.groups, configs)):
        rendered.append(families[group.family].render(graph, group, config, f"kw_{group.family}_{i}"))

    forward_args = []
    input_names = iter(graph.inputs)
    positions = set(graph.input_positions)
    for i in range(graph.n_forward_args):
        forward_args.append(next(input_names) if i in positions else f"_unused_{i}")
    body: list[str] = []
    if graph.inputs:
        body.append(f"_device = {graph.inputs[0]}.device")
    used = {v for n in graph.nodes for v in node_inputs(n)} | set(graph.outputs)
    for placeholder, fqn in graph.parameters.items():
        if placeholder in used:
            if all(part.isidentifier() for part in fqn.split(".")):
                body.append(f"{placeholder} = self.{fqn}")
            else:
                body.append(f"{placeholder} = self.get_submodule({fqn.rpartition('.')[0]!r})"
                            f".__getattr__({fqn.rpartition('.')[2]!r})")
    for kind, ref in _schedule(plan):
        if kind == "group":
            group = plan.groups[ref]
            targets = ", ".join(group.outputs) + ("," if len(group.outputs) == 1 else "")
            body.append(f"{targets} = {rendered[ref].launcher}({', '.join(group.inputs)})")
        else:
            node = graph.node(ref)
            body.append(f"{node.name} = {_aten_call(node)}")
    outputs = ", ".join(graph.outputs)
    body.append(f"return ({outputs},)" if graph.returns_tuple or len(graph.outputs) > 1 else f"return {outputs}")

    summary = "\n".join(f"  - {line}" for line in plan.describe())
    parts = [
        f'"""{title}\n\nGenerated by kernelwright from {graph.problem.path.name}; a KernelBench ModelNew file.\n'
        f"{summary}\n\"\"\"",
        HEADER_IMPORTS,
        graph.module_prelude,
        "",
        *(r.source + "\n\n" for r in rendered),
        "class ModelNew(nn.Module):",
        graph.init_source if graph.init_source.strip() else "    def __init__(self):\n        super().__init__()",
        "",
        f"    def forward(self, {', '.join(forward_args)}):",
        *(f"        {line}" for line in body),
        "",
    ]
    return "\n".join(parts)
