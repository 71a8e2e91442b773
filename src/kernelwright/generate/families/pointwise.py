"""Family 1 — pointwise chains: any connected run of elementwise operators with one result shape, with
broadcasting operands and scalar parameters, fused into one kernel that reads every input once and writes every
needed result once.

The kernel walks the result's elements flat, ``BLOCK`` at a time. Each operand is read in one of three ways,
decided from its shape when the source is generated and checked again by the launcher at run time: *flat*
(contiguous, the result's shape: ``ptr + offs``, 128-bit loads where aligned), *scalar* (one element), or
*strided* (broadcast or non-contiguous: per-dimension indices times the operand's strides, broadcast dimensions
skipped). Floating math is fp32; results are rounded to their dtype once, at the store.
"""

from __future__ import annotations

from kernelwright.generate import expr
from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    broadcastable,
    depends_on,
    fusable_pointwise,
    live_dims,
    make_group,
    operand_mode,
)
from kernelwright.generate.graph import Node, ProblemGraph, node_inputs

NAME = "pointwise"


class PointwiseFamily:
    name = NAME

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str]) -> Group | None:
        if node.name in claimed or not fusable_pointwise(node) or node.info is None or node.op in expr.CONSTANT_OPS:
            return None
        shape = node.info.shape
        members: list[str] = []
        member_set: set[str] = set()
        order = [n for n in graph.nodes if n.name not in claimed]
        start = order.index(node)
        for candidate in order[start:]:
            if candidate.name != node.name:
                if not fusable_pointwise(candidate) or candidate.info is None:
                    continue
                inputs = node_inputs(candidate)
                if not any(v in member_set for v in inputs):
                    continue
                if candidate.info.shape != shape and candidate.op not in expr.CONSTANT_OPS:
                    continue
            # Every operand from outside must broadcast to the result and must not itself need the group.
            memo: dict[str, bool] = {}
            outside = [v for v in node_inputs(candidate) if v not in member_set]
            if any(v in graph.values and not broadcastable(graph.info(v).shape, shape) for v in outside):
                continue
            if any(depends_on(graph, v, member_set, memo) for v in outside):
                continue
            members.append(candidate.name)
            member_set.add(candidate.name)
        # Producers of operands that are themselves pointwise with the result's shape are computed here too,
        # so a branch such as tanh(x) in f(x) - tanh(x) does not cost a kernel (and a round trip) of its own.
        grew = True
        while grew:
            grew = False
            for name in list(member_set):
                for v in node_inputs(graph.node(name)):
                    if v in member_set or v in claimed or v not in graph.users:
                        continue
                    try:
                        producer = graph.node(v)
                    except KeyError:
                        continue  # a placeholder
                    if not fusable_pointwise(producer) or producer.op in expr.CONSTANT_OPS or \
                            producer.info is None or producer.info.shape != shape:
                        continue
                    memo: dict[str, bool] = {}
                    if any(depends_on(graph, w, member_set, memo) for w in node_inputs(producer)):
                        continue
                    members.append(v)
                    member_set.add(v)
                    grew = True
        # Constants only the group uses are computed inline; others stay outside.
        for n in graph.nodes:
            if n.op in expr.CONSTANT_OPS and n.name not in claimed and n.name not in member_set and \
                    graph.users.get(n.name) and all(u in member_set for u in graph.users[n.name]):
                members.append(n.name)
                member_set.add(n.name)
        group = make_group(graph, NAME, members, anchor=node.name, shape=tuple(shape))
        if not group.inputs or any(graph.info(o).shape != tuple(shape) for o in group.outputs):
            return None
        return group

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Memory-bound: enough bytes in flight per SM matters most. The default is a lead until timed.
        return [{"BLOCK": b, "num_warps": w} for b, w in ((1024, 4), (2048, 8), (4096, 8), (512, 4), (1024, 8))]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        shape = tuple(group.detail["shape"])
        modes = {v: operand_mode(graph.info(v), shape) for v in group.inputs}
        strided = [v for v in group.inputs if modes[v] == "strided"]
        params = [f"in_{v}" for v in group.inputs] + [f"out_{o}" for o in group.outputs] + ["n_elements"]
        params += [f"size_{d}" for d in range(len(shape))] if strided else []
        for v in strided:
            params += [f"stride_{v}_{d}" for d in range(len(shape))]
        body = [
            "pid = tl.program_id(0)",
            "if IDX64:",
            "    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "else:",
            "    offs = pid * BLOCK + tl.arange(0, BLOCK)",
            "mask = offs < n_elements",
        ]
        if strided:
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
                dims = live_dims(info.shape, shape)
                offset = " + ".join(f"idx_{d} * stride_{v}_{d}" for d in dims) or "0"
                load = f"tl.load(in_{v} + ({offset}), mask=mask, other=0)"
            cdt = expr.compute_dtype(info.dtype)
            if cdt != info.dtype:
                load += f".to({expr.TL_DTYPE[cdt]})"
            body.append(f"x_{v} = {load}")
            env[v] = expr.Value(f"x_{v}", cdt)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all((graph.node(n) for n in group.nodes), env)
        body += emitter.lines
        for o in group.outputs:
            dtype = graph.info(o).dtype
            body.append(f"tl.store(out_{o} + offs, {env[o].expr}.to({expr.TL_DTYPE[dtype]}), mask=mask)")

        kernel = f"{ident}_kernel"
        lines = ["@triton.jit", f"def {kernel}({', '.join(params)}, BLOCK: tl.constexpr, IDX64: tl.constexpr):"]
        lines += [f"    {line}" for line in body]
        lines += ["", "", f"def {ident}({', '.join(group.inputs)}):"]
        lines.append(f'    """{", ".join(graph.node(n).op for n in group.nodes)}, fused: one pass over the result."""')
        constant_shapes = [graph.info(n).shape for n in group.nodes if graph.node(n).op in expr.CONSTANT_OPS
                           and graph.info(n).numel > 1]
        shapes = [f"{v}.shape" for v in group.inputs] + [repr(tuple(s)) for s in constant_shapes]
        lines.append(f"    shape = torch.broadcast_shapes({', '.join(shapes)})")
        for v in group.inputs:
            if modes[v] == "flat":
                lines.append(f"    if not ({v}.is_contiguous() and {v}.shape == shape):")
                lines.append(f"        {v} = {v}.expand(shape).contiguous()")
            elif modes[v] == "strided":
                lines.append(f"    {v} = {v}.expand(shape)")
        device = group.inputs[0]
        for o in group.outputs:
            lines.append(f"    out_{o} = torch.empty(shape, dtype={graph.info(o).dtype}, device={device}.device)")
        lines.append("    n_elements = math.prod(shape)")
        args = [*group.inputs, *(f"out_{o}" for o in group.outputs), "n_elements"]
        if strided:
            args.append("*shape")
            args += [f"*{v}.stride()" for v in strided]
        lines.append(f"    grid = (triton.cdiv(n_elements, {config['BLOCK']}),)")
        lines.append(f"    {kernel}[grid]({', '.join(args)}, BLOCK={config['BLOCK']}, IDX64=n_elements >= 2**31, "
                     f"num_warps={config['num_warps']})")
        outs = ", ".join(f"out_{o}" for o in group.outputs)
        lines.append(f"    return ({outs},)")
        return Rendered(source="\n".join(lines), launcher=ident)


