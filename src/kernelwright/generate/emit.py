"""Writing a candidate: one self-contained KernelBench ``ModelNew`` file a person can read.

The file holds the problem's own imports and constants, the rendered kernels and launchers of every group, and a
``ModelNew`` whose ``__init__`` is the reference's (same parameters, same order, so the same weights under the same
seed) and whose ``forward`` calls the launchers in dependency order, with PyTorch for whatever no template covers.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from kernelwright.generate import specialize
from kernelwright.generate.families.base import Config, Family, Rendered
from kernelwright.generate.graph import Node, ProblemGraph, Ref, Symbol, node_inputs
from kernelwright.generate.operators import MODE_DEPENDENT
from kernelwright.generate.plan import Plan
from kernelwright.generate.symbols import python_of

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
    """A node left to PyTorch, with sizes as run-time expressions where the capture was dynamic."""
    args_in = node.sym_args if node.sym_args is not None else node.args
    kwargs_in = node.sym_kwargs if node.sym_kwargs is not None else node.kwargs
    if node.target is operator.getitem:
        return f"{_fmt(args_in[0])}[{_fmt(args_in[1])}]"
    target = str(node.target)  # "aten.add.Tensor"
    args = [_fmt(a) for a in args_in] + [f"{k}={_fmt(v)}" for k, v in kwargs_in.items()]
    return f"torch.ops.{target}({', '.join(args)})"


def _symbol_expr(symbol: Symbol) -> str:
    """Python for one symbolic size (:func:`~kernelwright.generate.symbols.python_of`); the example's number as a
    last resort."""
    return python_of(symbol) or repr(symbol.hint)


def _symbols_used(value: Any, symbols: Mapping[str, Symbol], out: list[str]) -> None:
    """Symbols ``value`` refers to, dependencies first."""
    if isinstance(value, Ref):
        if value.name in symbols and value.name not in out:
            for a in symbols[value.name].args:
                _symbols_used(a, symbols, out)
            out.append(value.name)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _symbols_used(v, symbols, out)
    elif isinstance(value, dict):
        for v in value.values():
            _symbols_used(v, symbols, out)


def _node_symbols(graph: ProblemGraph, node: Node) -> list[str]:
    return _symbols(graph, (node.sym_args or (), node.sym_kwargs or {}))


def _symbols(graph: ProblemGraph, value: Any) -> list[str]:
    """The symbols ``value`` (names, or arguments holding Refs) needs, dependencies first."""
    found: list[str] = []
    refs = [Ref(v) if isinstance(v, str) else v for v in value] if isinstance(value, list) else value
    _symbols_used(refs, graph.symbols, found)
    return found


def _tensor_refs(args: Any) -> list[str]:
    found: list[str] = []
    if isinstance(args, Ref):
        found.append(args.name)
    elif isinstance(args, (list, tuple)):
        for a in args:
            found += _tensor_refs(a)
    return found


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
            group = plan.groups[item[1]]
            symbols = _symbols(graph, list(group.detail.get("sizes", ())))
        else:
            group, node = None, graph.node(item[1])
            symbols = _node_symbols(graph, node)
        # A size taken from another tensor (x.size(0)) needs that tensor computed first.
        sized = {r for s in symbols for r in _tensor_refs(graph.symbols[s].args) if r in graph.values}
        return (set(group.inputs) if group is not None else set(node_inputs(node))) | sized

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


def _state(fqn: str) -> str:
    """The expression for the module's parameter or buffer ``fqn`` (a state_dict key) inside ``forward``."""
    if all(part.isidentifier() for part in fqn.split(".")):
        return f"self.{fqn}"
    return f"self.get_submodule({fqn.rpartition('.')[0]!r}).__getattr__({fqn.rpartition('.')[2]!r})"


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
    body: list[str] = specialize.guard_lines(graph.specialized, forward_args)
    other_mode = bool(graph.forward_source) and graph.training and any(n.op in MODE_DEPENDENT for n in graph.nodes)
    if other_mode:
        # The kernels compute training mode's result (batch statistics, dropout); in eval mode the reference
        # computes another one, and so does this module: the forward as written.
        body += ["if not self.training:  # eval mode: not the mode the kernels were written for",
                 f"    return self._forward_as_written({', '.join(forward_args)})"]
    tensors = [v for v in graph.inputs if v not in graph.scalar_inputs]
    if tensors:
        body.append(f"_device = {tensors[0]}.device")
    elif graph.scalar_inputs:  # numbers only: where the module's weights are (else the default device)
        body.append("_device = next(iter(self.parameters()), torch.empty(0)).device")
    for name, dtype in graph.scalar_inputs.items():  # a number the forward takes, read by kernels as a 0-d tensor
        body.append(f"{name} = torch.as_tensor({name}, dtype={dtype}, device=_device)")
    used = {v for n in graph.nodes for v in node_inputs(n)} | set(graph.outputs)
    for placeholder, fqn in graph.parameters.items():
        if placeholder in used:
            body.append(f"{placeholder} = {_state(fqn)}")
    for placeholder, value in graph.constants.items():  # as the reference's forward makes them
        if placeholder in used:
            body.append(f"{placeholder} = torch.tensor({value.tolist()!r}, dtype={value.dtype}, device=_device)")
    defined: set[str] = set()  # symbolic sizes written so far

    def define(names: list[str]) -> None:
        for name in names:
            if name not in defined:
                defined.add(name)
                body.append(f"{name} = {_symbol_expr(graph.symbols[name])}")

    for kind, ref in _schedule(plan):
        if kind == "group":
            group = plan.groups[ref]
            sizes = list(group.detail.get("sizes", ()))  # run-time sizes the group's kernel computes with
            define(_symbols(graph, sizes))
            targets = ", ".join(group.outputs) + ("," if len(group.outputs) == 1 else "")
            body.append(f"{targets} = {rendered[ref].launcher}({', '.join([*group.inputs, *sizes])})")
        else:
            node = graph.node(ref)
            define(_node_symbols(graph, node))
            body.append(f"{node.name} = {_aten_call(node)}")
    for value, kind, target in graph.writes:  # written back in place, as the reference's forward does
        body.append(f"{_state(target) if kind == 'buffer' else target}.copy_({value})")
    returned = graph.returned
    outputs = ", ".join(returned)
    body.append(f"return ({outputs},)" if graph.returns_tuple or len(returned) > 1 else f"return {outputs}")

    summary = "\n".join(f"  - {line}" for line in plan.describe(share=False))
    guarded = specialize.guard_constant(graph.specialized)
    code = [
        *(r.source + "\n\n" for r in rendered),
        *([guarded, "", ""] if guarded else []),
        "class ModelNew(nn.Module):",
        graph.init_source if graph.init_source.strip() else "    def __init__(self):\n        super().__init__()",
        "",
        f"    def forward(self, {', '.join(forward_args)}):",
        *(f"        {line}" for line in body),
        "",
    ]
    if other_mode or graph.specialized:
        code += [graph.forward_source, ""]
    prelude = _prelude(graph.module_prelude, "\n".join(code))
    standard = [name for name, used in (("math", _uses("math", prelude + "\n".join(code))),
                                        ("warnings", bool(graph.specialized))) if used]
    header = HEADER_IMPORTS.replace("import math\n\n", "".join(f"import {n}\n" for n in standard) + "\n"
                                    if standard else "")
    parts = [
        f'"""{title}\n\nGenerated by kernelwright from {graph.problem.path.name}; a KernelBench ModelNew file.\n'
        f"{summary}\n\"\"\"",
        header,
        prelude,
        "",
        *code,
    ]
    return "\n".join(parts)


def _uses(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}\b", text) is not None


def _prelude(prelude: str, code: str) -> str:
    """The problem's own module-level code without the imports the header already makes or nothing uses (a best.py
    imported torch twice, 2026-12-01)."""
    header = {line.strip() for line in HEADER_IMPORTS.splitlines() if line.strip()}
    tree = ast.parse(prelude)
    kept: list[str] = []
    others = "\n".join(ast.get_source_segment(prelude, stmt) or "" for stmt in tree.body
                       if not isinstance(stmt, (ast.Import, ast.ImportFrom)))
    for stmt in tree.body:
        segment = ast.get_source_segment(prelude, stmt) or ""
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if segment.strip() in header:
                continue
            bound = [alias.asname or alias.name.split(".")[0] for alias in stmt.names]
            if "*" not in bound and not any(_uses(n, code + "\n" + others) for n in bound):
                continue
        kept.append(segment)
    return "\n".join(kept)
