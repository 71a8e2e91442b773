"""The source of a pointwise group: one kernel over the result's elements, flat, and its launcher."""

from __future__ import annotations

from dataclasses import replace

import torch

from kernelwright.generate import expr
from kernelwright.generate.families import base
from kernelwright.generate.families.base import Group, Rendered
from kernelwright.generate.families.pointwise.config import PointwiseConfig
from kernelwright.generate.graph import Node, ProblemGraph
from kernelwright.generate.operators import CONSTANTS


def write(graph: ProblemGraph, group: Group, config: PointwiseConfig, ident: str) -> Rendered:
    shape = tuple(group.detail["shape"])
    modes = {v: base.operand_mode(graph.info(v), shape) for v in group.inputs}
    strided = [v for v in group.inputs if modes[v] == "strided"]
    sizes = list(group.detail.get("sizes", ()))
    params = [f"in_{v}" for v in group.inputs] + [f"out_{o}" for o in group.outputs] + ["n_elements", *sizes]
    params += [f"size_{d}" for d in range(len(shape))] if strided else []
    for v in strided:
        params += [f"stride_{v}_{d}" for d in range(len(shape))]
    kernel = f"{ident}_kernel"
    lines = ["@triton.jit", f"def {kernel}({', '.join(params)}, BLOCK: tl.constexpr, IDX64: tl.constexpr):"]
    lines += [f"    {line}" for line in _body(graph, group, shape, modes)]
    lines += ["", "", *_launcher(graph, group, config, ident, modes)]
    return Rendered(source="\n".join(lines), launcher=ident)


def _body(graph: ProblemGraph, group: Group, shape: tuple[int, ...], modes: dict[str, str]) -> list[str]:
    body = base.flat_lanes("n_elements")
    if any(mode == "strided" for mode in modes.values()):
        inner = "1"
        for d in reversed(range(len(shape))):
            body.append(f"idx_{d} = (offs // {inner}) % size_{d}" if inner != "1" else f"idx_{d} = offs % size_{d}")
            inner = f"size_{d}" if inner == "1" else f"({inner} * size_{d})"
    env: dict[str, expr.Value] = {}
    for v in group.inputs:
        info = graph.info(v)
        if modes[v] == "flat":
            load = f"tl.load(in_{v} + offs, mask=mask, other=0)"
        elif modes[v] == "scalar":
            load = f"tl.load(in_{v})"
        else:
            dims = base.live_dims(info.shape, shape)
            offset = " + ".join(f"idx_{d} * stride_{v}_{d}" for d in dims) or "0"
            load = f"tl.load(in_{v} + ({offset}), mask=mask, other=0)"
        line, env[v] = base.load_line(v, load, info.dtype)
        body.append(line)
    for size in group.detail.get("sizes", ()):  # a run-time size, passed by the launcher
        env[size] = expr.Value(size, torch.int64 if isinstance(graph.symbols[size].hint, int) else torch.float32)
    emitter = expr.PointwiseEmitter()
    emitter.emit_all((_sized(graph.node(n)) for n in group.nodes), env)
    body += emitter.lines
    for o in group.outputs:
        dtype = graph.info(o).dtype
        body.append(f"tl.store(out_{o} + offs, {env[o].expr}.to({expr.TL_DTYPE[dtype]}), mask=mask)")
    return body


def _sized(node: Node) -> Node:
    """``node`` with its run-time sizes as arguments (the kernel's size parameters) instead of the example's
    numbers."""
    if node.sym_args is None and node.sym_kwargs is None:
        return node
    return replace(node, args=node.sym_args if node.sym_args is not None else node.args,
                   kwargs=node.sym_kwargs if node.sym_kwargs is not None else node.kwargs)


def _launcher(graph: ProblemGraph, group: Group, config: PointwiseConfig, ident: str, modes: dict[str, str]) -> list[str]:
    strided = [v for v in group.inputs if modes[v] == "strided"]
    sizes = list(group.detail.get("sizes", ()))
    lines = [f"def {ident}({', '.join([*group.inputs, *sizes])}):"]
    lines.append(f'    """{", ".join(graph.node(n).op for n in group.nodes)}, fused: one pass over the result."""')
    constant_shapes = [graph.info(n).shape for n in group.nodes if graph.node(n).op in CONSTANTS - {"full_like"}
                       and graph.info(n).numel > 1]  # full_like's shape is its argument's, an input's
    shapes = [f"{v}.shape" for v in group.inputs] + [repr(tuple(s)) for s in constant_shapes]
    lines.append(f"    shape = torch.broadcast_shapes({', '.join(shapes)})")
    lines += base.operand_layout_lines(group.inputs, modes)
    device = group.inputs[0]
    for o in group.outputs:
        lines.append(f"    out_{o} = torch.empty(shape, dtype={graph.info(o).dtype}, device={device}.device)")
    lines.append("    n_elements = math.prod(shape)")
    args = [*group.inputs, *(f"out_{o}" for o in group.outputs), "n_elements", *sizes]
    args += base.strided_args(strided)
    lines.append(f"    grid = (triton.cdiv(n_elements, {config.BLOCK}),)")
    lines.append(f"    {ident}_kernel[grid]({', '.join(args)}, BLOCK={config.BLOCK}, IDX64=n_elements >= 2**31, "
                 f"num_warps={config.num_warps})")
    outs = ", ".join(f"out_{o}" for o in group.outputs)
    lines.append(f"    return ({outs},)")
    return lines
