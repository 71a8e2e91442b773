"""The source of a reduction group: its kernel (for strategy split, the partial and the combining kernel) — each
a signature and a body written by :class:`~.body.BodyWriter` — and the launcher that reads the sizes from the
tensors, allocates the outputs (and split's workspace) and launches them."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kernelwright.generate.families.base import Config, Group, Rendered
from kernelwright.generate.families.reduction.body import BodyWriter
from kernelwright.generate.families.reduction.model import (
    FULL,
    NAME,
    VEC,
    Layout,
    Spec,
    full_class,
    vec_class,
)
from kernelwright.generate.graph import ProblemGraph


def write(graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
    spec: Spec = group.detail["spec"]
    lines, writers = _kernels(graph, group, spec, config, ident)
    lines += ["", "", *_launcher(graph, group, spec, config, ident, writers)]
    return Rendered(source="\n".join(lines), launcher=ident,
                    notes=(f"{NAME}: {_describe(spec.layout)}, {config['strategy']}",))


def _sizes(layout: Layout) -> list[str]:
    """The size arguments every kernel of the group takes first."""
    return ["n_inner", "n_red"] if layout.kind == "strided" else ["n_out", "n_red"]


def _kernels(graph: ProblemGraph, group: Group, spec: Spec, config: Config, ident: str
             ) -> tuple[list[str], list[BodyWriter]]:
    """The group's kernels — one, or for strategy split the partial and the combining kernel — and the writers of
    their bodies (what each body asked of its signature)."""
    sizes = _sizes(spec.layout)
    if config["strategy"] != "split":
        whole = BodyWriter(graph, group, spec, config)
        return _kernel(f"{ident}_kernel", graph, group, whole, whole.body(), sizes, "BLOCK_N"), [whole]
    partial = BodyWriter(graph, group, spec, config, "partial")
    lines = _kernel(f"{ident}_partial_kernel", graph, group, partial, partial.body_partial(),
                    [*sizes, "n_q", "per_split"], "BLOCK_N")
    combine = BodyWriter(graph, group, spec, config, "combine")
    lines += ["", ""] + _kernel(f"{ident}_kernel", graph, group, combine, combine.body_combine(),
                                [*sizes, "n_q", "n_split", "per_split"], "BLOCK_S", workspace=partial.workspace())
    return lines, [partial, combine]


def _launcher(graph: ProblemGraph, group: Group, spec: Spec, config: Config, ident: str,
              writers: Sequence[BodyWriter]) -> list[str]:
    """The launcher: sizes from the tensors, the outputs (and split's workspace), the launches."""
    layout = spec.layout
    split = config["strategy"] == "split"
    sizes = _sizes(layout)
    workspace = writers[0].workspace() if split else []
    primary = next(v for v in group.inputs
                   if tuple(graph.info(v).shape) == layout.shape and FULL in spec.uses(v))
    ops = ", ".join(dict.fromkeys(graph.node(n).op for n in group.nodes if graph.node(n).op != "getitem"))
    strategy = {"single": "whole rows in registers", "loop": "rows walked in chunks, one loop per pass",
                "split": "each row split into shares reduced by separate programs, then merged"}
    lines = [f"def {ident}({', '.join(group.inputs)}):",
             f'    """{ops}: {_describe(layout)}; {strategy[config["strategy"]]}."""']
    for v in group.inputs:
        classes = {full_class(layout, graph.info(v).shape) if u == FULL else
                   vec_class(layout, graph.info(v).shape) if u == VEC else "channel" for u in spec.uses(v)}
        if classes - {"scalar", "strided"} or not classes:
            lines.append(f"    {v} = {v}.contiguous()")
    lines.append(f"    shape = {primary}.shape")
    lines += ["    " + line for line in _size_lines(layout)]
    device = f"{primary}.device"
    for o in group.outputs:
        dtype = graph.info(o).dtype
        shape = "shape" if spec.level(o) == FULL else _vec_shape_code(layout, tuple(graph.info(o).shape))
        lines.append(f"    out_{o} = torch.empty({shape}, dtype={dtype}, device={device})")
    outs = ", ".join(f"out_{o}" for o in group.outputs)
    lines.append(f"    if {'n_outer * n_inner' if layout.kind == 'strided' else 'n_out'} == 0:")
    lines.append(f"        return ({outs},)")
    lines += ["    " + line for line in _block_lines(layout, config)]
    index64 = f"IDX64={primary}.numel() >= 2**31"

    def launch_args(writer: BodyWriter, extra: list[str]) -> list[str]:
        args = list(group.inputs)
        if split:
            args += [f"ws_{v}" for v, _ in workspace]
        if writer.part != "partial":
            args += [f"out_{o}" for o in group.outputs]
        args += sizes + extra
        if writer.channel_loads:
            args += ["shape[1] // " + str(layout.groups), "math.prod(shape[2:])"]
        if writer.strided_inputs:
            args.append("*shape")
            args += [f"*{v}.expand(shape).stride()" for v in writer.strided_inputs]
        return args

    if split:
        n_q = "n_outer * n_inner" if layout.kind == "strided" else "n_out"
        lines += [f"    n_q = {n_q}",
                  f"    # Shares of each row, so that about {config['programs']} programs run (a lead, not yet "
                  "measured); chunks never straddle two shares.",
                  f"    n_split = max(1, min({config['programs']} // grid[0], triton.cdiv(n_red, BLOCK_N)))",
                  "    per_split = triton.cdiv(triton.cdiv(n_red, n_split), BLOCK_N) * BLOCK_N",
                  "    n_split = triton.cdiv(n_red, per_split)"]
        for v, dtype in workspace:
            lines.append(f"    ws_{v} = torch.empty((n_split, n_q), dtype={dtype}, device={device})")
        args = launch_args(writers[0], ["n_q", "per_split"])
        lines.append(f"    {ident}_partial_kernel[(grid[0], n_split)]({', '.join(args)}, BLOCK_M=BLOCK_M, "
                     f"BLOCK_N=BLOCK_N, {index64}, num_warps={config['num_warps']})")
        lines += ["    BLOCK_S = triton.next_power_of_2(n_split)",
                  "    BLOCK_Q = min(max(1024 // BLOCK_S, 1), triton.next_power_of_2(n_q))"]
        args = launch_args(writers[1], ["n_q", "n_split", "per_split"])
        lines.append(f"    {ident}_kernel[(triton.cdiv(n_q, BLOCK_Q),)]({', '.join(args)}, BLOCK_M=BLOCK_Q, "
                     f"BLOCK_S=BLOCK_S, {index64}, num_warps=4)")
    else:
        args = launch_args(writers[0], [])
        lines.append(f"    {ident}_kernel[grid]({', '.join(args)}, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, "
                     f"{index64}, num_warps={config['num_warps']})")
    lines.append(f"    return ({outs},)")
    return lines


def _kernel(name: str, graph: ProblemGraph, group: Group, writer: BodyWriter, body: list[str], sizes: list[str],
            block: str, *, workspace: Sequence[tuple[str, torch.dtype]] = ()) -> list[str]:
    """A kernel's source: its signature (pointers, sizes, the addressing a body asked for) and ``body``."""
    layout = writer.layout
    params = [f"in_{v}" for v in group.inputs]
    if writer.part == "partial":
        params += [f"ws_{v}" for v, _ in writer.workspace()]
    else:
        params += [f"ws_{v}" for v, _ in workspace] + [f"out_{o}" for o in group.outputs]
    params += sizes
    if writer.channel_loads:
        params += ["cpg", "hw"]
    if writer.strided_inputs:
        params += [f"size_{d}" for d in range(layout.rank)]
        for v in writer.strided_inputs:
            params += [f"stride_{v}_{d}" for d in range(layout.rank)]
    return ["@triton.jit",
            f"def {name}({', '.join(params)}, BLOCK_M: tl.constexpr, {block}: tl.constexpr, IDX64: tl.constexpr):",
            *body]


def _describe(layout: Layout) -> str:
    if layout.kind == "group":
        return f"statistics over each of {layout.groups} channel groups"
    dims = list(range(layout.start, layout.stop))
    where = "contiguous rows" if layout.kind == "row" else "a strided dim, coalesced along the inner dims"
    return f"reduces dim{'s' if len(dims) > 1 else ''} {', '.join(map(str, dims))} ({where})"


def _size_lines(layout: Layout) -> list[str]:
    if layout.kind == "group":
        return [f"n_out = shape[0] * {layout.groups}  # one row per (sample, group)",
                "n_red = math.prod(shape) // max(n_out, 1)"]
    s, e = layout.start, layout.stop
    if layout.kind == "row":
        return [f"n_out = math.prod(shape[:{s}])", f"n_red = math.prod(shape[{s}:])"]
    return [f"n_outer = math.prod(shape[:{s}])", f"n_red = math.prod(shape[{s}:{e}])",
            f"n_inner = math.prod(shape[{e}:])"]


def _vec_shape_code(layout: Layout, shape: tuple[int, ...]) -> str:
    if layout.kind == "group":
        return f"(shape[0], {layout.groups})"
    s, e = layout.start, layout.stop
    if shape == layout.keep_shape:
        parts = [f"*shape[:{s}]"] + ["1"] * (e - s) + [f"*shape[{e}:]"]
    else:
        parts = [f"*shape[:{s}]", f"*shape[{e}:]"]
    parts = [p for p in parts if p not in (f"*shape[:{0}]", f"*shape[{layout.rank}:]")]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _block_lines(layout: Layout, config: Config) -> list[str]:
    """Tile sizes and the grid (for split: the grid of programs per share)."""
    single = config["strategy"] == "single"
    block_n = "triton.next_power_of_2(n_red)" if single else \
        f"min({config['block_n']}, triton.next_power_of_2(n_red))"
    if layout.kind == "strided":
        return [f"BLOCK_M = min({config['block_m']}, triton.next_power_of_2(n_inner))",
                f"BLOCK_N = {block_n}",
                "grid = (n_outer * triton.cdiv(n_inner, BLOCK_M),)"]
    return [f"BLOCK_N = {block_n}",
            f"BLOCK_M = min(max({config['tile']} // BLOCK_N, 1), triton.next_power_of_2(n_out))  # rows a program",
            "grid = (triton.cdiv(n_out, BLOCK_M),)"]
