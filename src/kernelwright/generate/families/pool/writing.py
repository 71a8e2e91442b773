"""The source of a pooling group: one kernel over the output's elements, each looping over its window, the
epilogue applied before the single store; and its launcher, which sizes the output from the input at run time."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from kernelwright.generate import expr
from kernelwright.generate.families import base
from kernelwright.generate.families.base import Group, Rendered
from kernelwright.generate.families.pool.config import PoolConfig
from kernelwright.generate.families.pool.matching import Pooling
from kernelwright.generate.graph import ProblemGraph

# Windows of up to this many taps are unrolled (tl.static_range); larger ones are loops.
UNROLL_TAPS = 64


def write(graph: ProblemGraph, group: Group, config: PoolConfig, ident: str) -> Rendered:
    return _Writer(graph, group, config, ident).render()


def rows_apply(pool: Pooling, prologue: Sequence[str]) -> bool:
    """Whether the rows variant can render this pooling: an average, or a max without indices, with no prologue
    at its taps."""
    return (pool.kind == "avg" or pool.indices is None) and not prologue


class _Writer:
    """Source for one pooling group and one configuration."""

    def __init__(self, graph: ProblemGraph, group: Group, config: PoolConfig, ident: str) -> None:
        self.graph, self.group, self.config, self.ident = graph, group, config, ident
        self.pool: Pooling = group.detail["pooling"]
        self.shape: tuple[int, ...] = tuple(group.detail["shape"])
        self.in_shape: tuple[int, ...] = tuple(graph.info(self.pool.x).shape)
        self.lead = len(self.shape) - self.pool.rank  # batch and channel dimensions (flattened: "planes")
        self.prologue: tuple[str, ...] = tuple(group.detail["prologue"])
        self.epilogue: tuple[str, ...] = tuple(group.detail["epilogue"])
        self.sources = self._reads(self.prologue) if self.prologue else [self.pool.x]  # read at every tap
        self.operands = self._reads(self.epilogue)  # read once per output element
        self.source_modes = {v: self._source_mode(v) for v in self.sources}
        self.modes = {v: base.operand_mode(graph.info(v), self.shape) for v in self.operands}
        self.strided = [v for v in self.operands if self.modes[v] == "strided"]
        self.strided_sources = [v for v in self.sources if self.source_modes[v] == "strided"]
        self.tensors = list(dict.fromkeys([*self.sources, *self.operands]))  # a residual may be the input itself
        self.rows = config.variant == "rows"  # else lanes (PoolConfig: a variant is one of the two where made)
        if self.rows and not rows_apply(self.pool, self.prologue):
            raise ValueError("pool config variant='rows': for average pooling or max pooling without indices, "
                             "with no prologue; use 'lanes'")
        self.taps = base.next_pow2(self.pool.kernel[-1])  # the rows variant's tile width

    def _source_mode(self, v: str) -> str:
        """How a source is read; one of the pooled tensor's own shape never as a scalar, even of one element (a
        second shape grows it)."""
        info = self.graph.info(v)
        mode = base.operand_mode(info, self.in_shape)
        return "strided" if mode == "scalar" and tuple(info.shape) == self.in_shape else mode

    def _reads(self, nodes: tuple[str, ...]) -> list[str]:
        """The tensors from outside the group that ``nodes`` read, in order."""
        return base.outside_reads(self.graph, self.group, nodes)

    # -- the kernel ------------------------------------------------------------------------------------------
    def _params(self) -> list[str]:
        rank = self.pool.rank
        params = [f"in_{v}" for v in self.tensors] + [f"out_{o}" for o in self.group.outputs] + ["n_out"]
        params += [f"n_in_{d}" for d in range(rank)] + [f"n_out_{d}" for d in range(rank)]
        if self._lead_dims():
            params += [f"size_{d}" for d in range(self.lead)]
        for v in self.strided_sources:
            params += [f"source_stride_{v}_{d}" for d in range(len(self.in_shape))]
        for v in self.strided:
            params += [f"stride_{v}_{d}" for d in range(len(self.shape))]
        return [*params, "BLOCK: tl.constexpr", "IDX64: tl.constexpr"]

    def _lead_dims(self) -> list[int]:
        """Leading (batch, channel) dimensions whose index a strided source or operand needs."""
        live = {d for v in self.strided_sources for d in base.live_dims(self.graph.info(v).shape, self.in_shape)}
        live |= {d for v in self.strided for d in base.live_dims(self.graph.info(v).shape, self.shape)}
        return sorted(d for d in live if d < self.lead)

    def _indexing(self) -> list[str]:
        """Each lane's output element: its plane (batch x channel) and its window's first tap, per dimension."""
        p, rank = self.pool, self.pool.rank
        lines = [*base.flat_lanes("n_out"), "rest = offs"]
        for d in reversed(range(rank)):
            lines.append(f"o_{d} = rest % n_out_{d}")
            lines.append(f"rest = rest // n_out_{d}")
        lines.append("plane = rest  # the flattened leading (batch, channel) index")
        for d in self._lead_dims():
            inner = " * ".join(f"size_{e}" for e in range(d + 1, self.lead))
            lines.append(f"idx_{d} = {f'(plane // ({inner}))' if inner else 'plane'} % size_{d}")
        if any(mode == "flat" for mode in self.source_modes.values()):
            lines.append(f"plane_start = plane * ({' * '.join(f'n_in_{d}' for d in range(rank))})")
        for d in range(rank):
            lines.append(f"start_{d} = {base.affine(f'o_{d}', p.stride[d], -p.padding[d])}  # may lie in the padding")
        return lines

    def _row_tap(self, fill: str) -> list[str]:
        """The rows variant's tap: the (BLOCK, TAPS) tile of the pooled tensor at ``pos_<last>`` as ``v`` (fp32,
        ``fill`` outside the input); per-output terms of the address broadcast along the taps."""
        v, last = self.pool.x, self.pool.rank - 1
        info, mode = self.graph.info(v), self.source_modes[v]
        if mode == "flat":
            offset = f"plane_start[:, None] + pos_{last}"
        else:
            terms = []
            for d in base.live_dims(info.shape, self.in_shape):
                index = f"idx_{d}[:, None]" if d < self.lead else \
                    f"i_{last}" if d - self.lead == last else f"i_{d - self.lead}[:, None]"
                terms.append(f"{index} * source_stride_{v}_{d}")
            offset = " + ".join(terms) or "0"
        line, value = base.load_line(v, f"tl.load(in_{v} + ({offset}), mask=ok_{last}, other=0)", info.dtype)
        return [line, f"v = tl.where(ok_{last}, {value.expr}.to(tl.float32), {fill})"]

    def _tap(self, fill: str) -> tuple[list[str], list[str]]:
        """The pooled tensor's element at tap ``pos_<last>`` as ``v`` (fp32, ``fill`` outside the input): its
        sources loaded there and the prologue computed on them. Returns (lines before the loops, tap lines)."""
        graph, last = self.graph, self.pool.rank - 1
        hoisted: list[str] = []
        tap: list[str] = []
        env: dict[str, expr.Value] = {}
        for v in self.sources:
            info, mode = graph.info(v), self.source_modes[v]
            if mode == "scalar":
                line, env[v] = base.load_line(v, f"tl.load(in_{v})", info.dtype)
                hoisted.append(line)
                continue
            live = [] if mode == "flat" else base.live_dims(info.shape, self.in_shape)
            if live and max(live) < self.lead:  # per plane (a per-channel parameter): loaded once, before the loops
                offset = " + ".join(f"idx_{d} * source_stride_{v}_{d}" for d in live)
                line, env[v] = base.load_line(v, f"tl.load(in_{v} + ({offset}), mask=mask, other=0)", info.dtype)
                hoisted.append(line)
                continue
            if mode == "flat":
                offset = f"plane_start + pos_{last}"
            else:
                offset = " + ".join(f"{f'idx_{d}' if d < self.lead else f'i_{d - self.lead}'} * "
                                    f"source_stride_{v}_{d}" for d in live) or "0"
            line, env[v] = base.load_line(v, f"tl.load(in_{v} + ({offset}), mask=ok_{last}, other=0)", info.dtype)
            tap.append(line)
        emitter = expr.PointwiseEmitter(prefix="p")
        emitter.emit_all((graph.node(n) for n in self.prologue), env)
        value = env[self.pool.x]
        tap += emitter.lines
        tap.append(f"v = tl.where(ok_{last}, {value.expr}.to(tl.float32), {fill})")
        return hoisted, tap

    def _window(self, tap: list[str]) -> list[str]:
        """Nested loops over the window's taps, with ``tap`` (the lines using element ``pos_<last>`` under mask
        ``ok_<last>``) innermost. The rows variant has no loop over the last dimension: its taps are the second
        axis of a (BLOCK, TAPS) tile, so a warp reads whole window rows, consecutive along the input's rows, where
        a lane an output reads addresses a stride apart (KernelBench's 45_Average_Pooling_2D: 11 floats)."""
        p, rank = self.pool, self.pool.rank
        looped = p.kernel[:-1] if self.rows else p.kernel
        loop = "tl.static_range" if math.prod(looped) <= UNROLL_TAPS else "range"
        lines: list[str] = []
        for d in range(rank):
            if self.rows and d == rank - 1:
                pad = "    " * d
                inside = "mask" if d == 0 else f"ok_{d - 1}"
                pos = f"i_{d}" if d == 0 else f"pos_{d - 1}[:, None] * n_in_{d} + i_{d}"
                lines += [
                    f"{pad}i_{d} = start_{d}[:, None] + ({base.affine('taps', p.dilation[d], 0)})[None, :]",
                    f"{pad}ok_{d} = {inside}[:, None] & (taps < {p.kernel[d]})[None, :] & (i_{d} >= 0) & "
                    f"(i_{d} < n_in_{d})",
                    f"{pad}pos_{d} = {pos}",
                ]
                break
            pad = "    " * d
            inside = "mask" if d == 0 else f"ok_{d - 1}"
            pos = f"i_{d}" if d == 0 else f"pos_{d - 1} * n_in_{d} + i_{d}"
            lines += [
                f"{pad}for k_{d} in {loop}({p.kernel[d]}):",
                f"{pad}    i_{d} = start_{d} + {base.affine(f'k_{d}', p.dilation[d], 0)}",
                f"{pad}    ok_{d} = {inside} & (i_{d} >= 0) & (i_{d} < n_in_{d})",
                f"{pad}    pos_{d} = {pos}",
            ]
        pad = "    " * (rank - 1 if self.rows else rank)
        return lines + [f"{pad}{line}" for line in tap]

    def _max(self) -> list[str]:
        """Max pooling as PyTorch computes it: -inf to start, a tap taken when larger or NaN (so NaN propagates
        and, for the indices, the first of equal maxima and the last NaN win)."""
        p, rank, last = self.pool, self.pool.rank, self.pool.rank - 1
        if self.rows:  # a row of taps at a time; NaN kept by hand (a reduction's maximum would drop it)
            tap = [*self._row_tap('float("-inf")'), "nan = tl.max((v != v).to(tl.int32), axis=1) > 0",
                   'top = tl.max(tl.where(v != v, float("-inf"), v), axis=1)',
                   'best = tl.where(nan | (best != best), float("nan"), tl.maximum(best, top))']
            return [f"taps = tl.arange(0, {self.taps})  # the window's last dimension",
                    'best = tl.full([BLOCK], float("-inf"), tl.float32)', *self._window(tap), "pooled = best"]
        lines, tap = self._tap('float("-inf")')
        lines.append('best = tl.full([BLOCK], float("-inf"), tl.float32)')
        if p.indices is not None:
            # The index of a window holding nothing above -inf: its first tap inside the input, as in PyTorch.
            for d in range(rank):
                step = p.dilation[d]
                first = "tl.maximum(start_{d}, 0)" if step == 1 else \
                    f"tl.where(start_{{d}} < 0, start_{{d}} + ((-start_{{d}} + {step - 1}) // {step}) * {step}, " \
                    "start_{d})"
                lines.append(f"first_{d} = " + first.format(d=d))
            position = "first_0"
            for d in range(1, rank):
                position = f"({position}) * n_in_{d} + first_{d}"
            lines.append(f"arg = {position}  # within the plane, as PyTorch counts indices")
        tap += ["take = (v > best) | (v != v)", "best = tl.where(take, v, best)"]
        if p.indices is not None:
            tap.append(f"arg = tl.where(take, pos_{last}, arg)")
        return lines + self._window(tap) + ["pooled = best"]

    def _avg(self) -> list[str]:
        """Average pooling in fp32, divided as PyTorch divides: by ``divisor_override``, else by the window clipped
        to the padded input (count_include_pad) or to the input itself; a window with nothing inside is 0."""
        p, rank = self.pool, self.pool.rank
        if self.rows:
            lines, tap = [f"taps = tl.arange(0, {self.taps})  # the window's last dimension"], self._row_tap("0.0")
            tap.append("acc += tl.sum(v, axis=1)")
        else:
            lines, tap = self._tap("0.0")
            tap.append("acc += v")
        lines.append("acc = tl.zeros([BLOCK], dtype=tl.float32)")
        lines += self._window(tap)
        for d in range(rank):
            lines.append(f"end_{d} = tl.minimum(start_{d} + {p.kernel[d]}, n_in_{d} + {p.padding[d]})")
            lines.append(f"inside_{d} = tl.maximum(tl.minimum(end_{d}, n_in_{d}) - tl.maximum(start_{d}, 0), 0)")
        lines.append(f"count = {' * '.join(f'inside_{d}' for d in range(rank))}")
        if p.divisor_override is not None:
            divisor = f"tl.full([BLOCK], {p.divisor_override}, tl.float32)"
        elif p.count_include_pad:
            divisor = f"({' * '.join(f'(end_{d} - start_{d})' for d in range(rank))}).to(tl.float32)"
        else:
            divisor = "count.to(tl.float32)"
        lines.append(f"divisor = {divisor}")
        lines.append("pooled = tl.where(count > 0, tl.div_rn(acc, tl.maximum(divisor, 1.0)), 0.0)")
        return lines

    def _operand_loads(self) -> tuple[list[str], dict[str, expr.Value]]:
        """The epilogue's operands: flat, scalar, or through per-dimension indices of the output."""
        lines: list[str] = []
        env: dict[str, expr.Value] = {}
        for v in self.operands:
            info = self.graph.info(v)
            if self.modes[v] == "scalar":
                load = f"tl.load(in_{v})"
            elif self.modes[v] == "flat":
                load = f"tl.load(in_{v} + offs, mask=mask, other=0)"
            else:
                offset = " + ".join(f"{f'idx_{d}' if d < self.lead else f'o_{d - self.lead}'} * stride_{v}_{d}"
                                    for d in base.live_dims(info.shape, self.shape)) or "0"
                load = f"tl.load(in_{v} + ({offset}), mask=mask, other=0)"
            line, env[v] = base.load_line(v, load, info.dtype)
            lines.append(line)
        return lines, env

    def _kernel(self) -> list[str]:
        p, graph = self.pool, self.graph
        body = self._indexing() + (self._max() if p.kind == "max" else self._avg())
        loads, env = self._operand_loads()
        body += loads
        env[p.values] = expr.Value("pooled", torch.float32)
        if p.indices is not None:
            env[p.indices] = expr.Value("arg", torch.int64)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all((graph.node(n) for n in self.epilogue), env)
        body += emitter.lines
        for o in self.group.outputs:
            body.append(f"tl.store(out_{o} + offs, {env[o].expr}.to({expr.TL_DTYPE[graph.info(o).dtype]}), "
                        "mask=mask)")
        lines = ["@triton.jit", f"def {self.ident}_kernel({', '.join(self._params())}):"]
        lines.append(f'    """{self._describe()}: each program computes BLOCK output elements (flat over planes x '
                     'output positions), looping over their windows."""')
        return lines + [f"    {line}" for line in body]

    def _describe(self) -> str:
        p = self.pool
        what = f"{p.kind} pooling {p.rank}-D, kernel {list(p.kernel)}, stride {list(p.stride)}, padding " \
               f"{list(p.padding)}"
        if p.kind == "max" and max(p.dilation) > 1:
            what += f", dilation {list(p.dilation)}"
        if p.ceil_mode:
            what += ", ceil_mode"
        if p.kind == "avg":
            what += f", divisor_override {p.divisor_override}" if p.divisor_override is not None else \
                f", count_include_pad={p.count_include_pad}"
        if p.indices is not None:
            what += ", with indices"
        ops = [self.graph.node(n).op for n in self.epilogue]
        if self.prologue:
            what = f"{', '.join(self.graph.node(n).op for n in self.prologue)} at each tap, then {what}"
        return ", ".join([what, *ops])

    # -- the launcher ----------------------------------------------------------------------------------------
    def _sizes(self) -> list[str]:
        """Launcher lines: the pooled tensor's shape, its sources laid out for it, and the output's shape as
        PyTorch computes it (floor or ceil division; with ceil_mode, no window that starts in the right padding)."""
        p, rank = self.pool, self.pool.rank
        if self.prologue:
            lines = [f"    shape = torch.broadcast_shapes({', '.join(f'{v}.shape' for v in self.sources)})"]
        else:
            lines = [f"    shape = {p.x}.shape"]
        lines += base.operand_layout_lines(self.sources, self.source_modes)
        lines.append(f"    lead = shape[:-{rank}]")
        lines.append(f"    {', '.join(f'n_in_{d}' for d in range(rank))}, = shape[-{rank}:]")
        for d in range(rank):
            extra = 2 * p.padding[d] - p.dilation[d] * (p.kernel[d] - 1) - 1 + (p.stride[d] - 1 if p.ceil_mode else 0)
            lines.append(f"    n_out_{d} = ({base.affine(f'n_in_{d}', 1, extra)}) // {p.stride[d]} + 1")
            if p.ceil_mode:
                lines.append(f"    if (n_out_{d} - 1) * {p.stride[d]} >= {base.affine(f'n_in_{d}', 1, p.padding[d])}:")
                lines.append(f"        n_out_{d} -= 1")
        lines.append(f"    shape = (*lead, {', '.join(f'n_out_{d}' for d in range(rank))})")
        return lines

    def _launcher(self) -> list[str]:
        graph, config, rank = self.graph, self.config, self.pool.rank
        device = self.sources[0]
        lines = [f"def {self.ident}({', '.join(self.group.inputs)}):"]
        lines.append(f'    """{self._describe()}: one Triton kernel, one pass over the output."""')
        lines += self._sizes()
        lines += base.operand_layout_lines(self.operands, self.modes)
        for o in self.group.outputs:
            lines.append(f"    out_{o} = torch.empty(shape, dtype={graph.info(o).dtype}, device={device}.device)")
        outs = ", ".join(f"out_{o}" for o in self.group.outputs)
        lines.append("    n_out = math.prod(shape)")
        lines.append("    if n_out == 0:")
        lines.append(f"        return ({outs},)")
        args = [*self.tensors, *(f"out_{o}" for o in self.group.outputs), "n_out"]
        args += [f"n_in_{d}" for d in range(rank)] + [f"n_out_{d}" for d in range(rank)]
        if self._lead_dims():
            args.append("*lead")
        args += [f"*{v}.stride()" for v in [*self.strided_sources, *self.strided]]
        block = config.BLOCK
        big = f"max(math.prod(lead) * {' * '.join(f'n_in_{d}' for d in range(rank))}, n_out) >= 2**31"
        lines.append(f"    {self.ident}_kernel[(triton.cdiv(n_out, {block}),)]({', '.join(args)}, BLOCK={block}, "
                     f"IDX64={big}, num_warps={config.num_warps})")
        lines.append(f"    return ({outs},)")
        return lines

    def render(self) -> Rendered:
        source = "\n".join([*self._kernel(), "", "", *self._launcher()])
        return Rendered(source=source, launcher=self.ident)
