"""One reduction kernel's body: values written on demand where they are needed (a tile, a per-row vector, a
gather), the reductions of each pass (whole rows in registers, or chunk by chunk with per-lane accumulators, an
online max/sum and a chunk-wise Welford merge), and for strategy split the partial and combining kernels."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import Config, Group, loop_header
from kernelwright.generate.families.reduction.model import FULL, VEC, Op, Spec, full_class, vec_class
from kernelwright.generate.graph import ProblemGraph, node_inputs

INDEX_SENTINEL = 2147483647  # "no index yet" in argmax accumulators; rows are shorter than 2**31 elements
INF, NAN = '-float("inf")', 'float("nan")'


def result_dtype(op: Op, i: int) -> torch.dtype:
    """The dtype of a reduction's ``i``-th result: an index (argmax/argmin's second) and an integer sum (a count of
    a mask) are int64, every other result fp32."""
    if (op.reduce in ("argmax", "argmin") and i == 1) or op.reduce == "isum":
        return torch.int64
    return torch.float32


@dataclass
class Ctx:
    """Where code is being written: ``tile`` (a [rows, chunk] tile), ``vec`` (one value per output row) or
    ``gather`` (full-level values re-evaluated at one reduced index per row)."""

    kind: str
    prefix: str
    lines: list[str]
    pad: str
    env: dict[str, expr.Value] = field(default_factory=dict)
    offs: str = "offs"
    mask: str = "mask"
    index: str = ""  # gather: the reduced index per row

    def emit(self, line: str) -> None:
        self.lines.append(self.pad + line)


class BodyWriter:
    """Writes one kernel's body. ``part``: ``whole`` (strategies single and loop), or for strategy split the
    ``partial`` kernel (a share of each row, partial results to a workspace) and the ``combine`` kernel (merges
    the partial results, then everything per row)."""

    def __init__(self, graph: ProblemGraph, group: Group, spec: Spec, config: Config, part: str = "whole") -> None:
        self.graph, self.group, self.spec, self.config, self.part = graph, group, spec, config, part
        self.layout = spec.layout
        self.strided = self.layout.kind == "strided"
        self.axis = 0 if self.strided else 1
        self.tile = "[BLOCK_N, BLOCK_M]" if self.strided else "[BLOCK_M, BLOCK_N]"
        self.q = "offs_q" if self.strided or part == "combine" else "offs_m"  # output (row) index
        self.qmask = "mask_q" if part == "combine" else "mask_i" if self.strided else "mask_m"
        self.single = config["strategy"] == "single"
        # the reduced range a program walks: the whole row, or its share of it (split)
        self.lo, self.hi = ("lo", "hi") if part == "partial" else ("0", "n_red")
        self.lines: list[str] = []
        self.vec = Ctx("vec", "s", self.lines, "    ")
        self.top: dict[str, expr.Value] = {}  # scalar operands, loaded once
        self.gathers = 0
        self.lines_top: list[str] = []  # operands loaded once, before the passes
        self.strided_inputs: list[str] = []
        self.channel_loads = False
        self._phase: dict[str, int] = {}
        self._scalar: dict[str, bool] = {}

    # -- shapes and broadcasting ------------------------------------------------------------------------------
    def bcast(self, name: str) -> str:
        """A per-row vector spread over the tile."""
        return f"{name}[None, :]" if self.strided else f"{name}[:, None]"

    def bcast_n(self, name: str) -> str:
        """A per-reduced-index vector spread over the tile."""
        return f"{name}[:, None]" if self.strided else f"{name}[None, :]"

    def phase(self, name: str) -> int:
        """Values of phase p are available in pass p (full) or before it (per-row)."""
        if name not in self._phase:
            op = self.spec.producer.get(name)
            if op is None:
                self._phase[name] = 0
            elif op.kind == "reduce":
                self._phase[name] = self.phase(op.deps[0]) + 1
            else:
                self._phase[name] = max((self.phase(d) for d in op.deps), default=0)
        return self._phase[name]

    def scalar(self, name: str) -> bool:
        """Whether the value is one number for the whole kernel (a constant, a one-element operand)."""
        if name not in self._scalar:
            op = self.spec.producer.get(name)
            if op is None:
                self._scalar[name] = math.prod(self.graph.info(name).shape) == 1
            elif op.kind in ("reduce", "gather", "load"):
                self._scalar[name] = False
            else:
                self._scalar[name] = all(self.scalar(d) for d in op.deps)
        return self._scalar[name]

    # -- values on demand --------------------------------------------------------------------------------------
    def need(self, name: str, ctx: Ctx) -> expr.Value:
        if name in ctx.env:
            return ctx.env[name]
        if name in self.top:
            return self.top[name]
        op = self.spec.producer.get(name)
        if op is None:
            return self.load(name, ctx)
        level = VEC if op.kind == "reduce" else op.level
        if level == VEC:
            if ctx.kind == "vec":
                self.write_op(op, ctx)
                return ctx.env[name]
            value = self.vec.env.get(name)
            if value is None:
                raise AssertionError(f"per-row value {name} used before it is computed")
            if ctx.kind == "gather" or self.scalar(name):
                return value
            return expr.Value(self.bcast(value.expr), value.dtype)
        if level == FULL and ctx.kind == "vec":
            raise AssertionError(f"full value {name} used per row")
        self.write_op(op, ctx)
        return ctx.env[name]

    def load(self, name: str, ctx: Ctx) -> expr.Value:
        info = self.graph.info(name)
        cdt = expr.compute_dtype(info.dtype)
        widen = f".to({expr.TL_DTYPE[cdt]})" if cdt != info.dtype else ""
        if ctx.kind == "vec":
            cls = vec_class(self.layout, info.shape)
        else:
            cls = full_class(self.layout, info.shape)
        if cls == "scalar":
            self.top[name] = expr.Value(f"xs_{name}", cdt)
            self.lines_top.append(f"    xs_{name} = tl.load(in_{name}){widen}")
            return self.top[name]
        if cls == "vec":
            if name not in self.vec.env:
                self.lines_top.append(f"    xq_{name} = tl.load(in_{name} + {self.q}, mask={self.qmask}, other=0)"
                                      f"{widen}")
                self.vec.env[name] = expr.Value(f"xq_{name}", cdt)
            value = self.vec.env[name]
            if ctx.kind == "tile":
                return expr.Value(self.bcast(value.expr), cdt)
            return value
        if ctx.kind == "gather":
            var = f"{ctx.prefix}_x_{name}"
            if cls == "full":
                at = ctx.offs
            elif cls == "reduced":
                at = ctx.index
            else:
                at = self.strided_offset(name, ctx.offs)
            ctx.emit(f"{var} = tl.load(in_{name} + {at}, mask={ctx.mask}, other=0){widen}")
            ctx.env[name] = expr.Value(var, cdt)
            return ctx.env[name]
        if cls == "full":
            ctx.emit(f"x_{name} = tl.load(in_{name} + offs, mask=mask, other=0){widen}")
            ctx.env[name] = expr.Value(f"x_{name}", cdt)
        elif cls == "reduced":
            ctx.emit(f"xn_{name} = tl.load(in_{name} + offs_n, mask=mask_n, other=0){widen}")
            ctx.env[name] = expr.Value(self.bcast_n(f"xn_{name}"), cdt)
        elif cls == "strided":
            ctx.emit(f"x_{name} = tl.load(in_{name} + {self.strided_offset(name, 'offs')}, mask=mask, other=0)"
                     f"{widen}")
            ctx.env[name] = expr.Value(f"x_{name}", cdt)
        else:
            raise AssertionError(f"operand {name} of shape {info.shape} has no addressing")
        return ctx.env[name]

    def strided_offset(self, name: str, offs: str) -> str:
        """The address of a broadcast operand from the flat index of the element in the full shape."""
        if name not in self.strided_inputs:
            self.strided_inputs.append(name)
        shape = self.layout.shape
        operand = tuple(self.graph.info(name).shape)
        padded = (1,) * (len(shape) - len(operand)) + operand
        terms = []
        for d in range(len(shape)):
            if padded[d] == 1:
                continue
            inner = " * ".join(f"size_{e}" for e in range(d + 1, len(shape)))
            position = f"({offs} // ({inner}))" if inner else offs
            if d > 0:
                position = f"({position} % size_{d})"
            terms.append(f"{position} * stride_{name}_{d}")
        return "(" + " + ".join(terms) + ")" if terms else "0"

    def write_op(self, op: Op, ctx: Ctx) -> None:
        if op.kind == "alias":
            ctx.env[op.name] = self.need(op.deps[0], ctx)
        elif op.kind == "node":
            node = self.graph.node(op.node)
            env = {v: self.need(v, ctx) for v in node_inputs(node)}
            emitter = expr.PointwiseEmitter(ctx.prefix)
            ctx.env[op.name] = emitter.emit(node, env)
            for line in emitter.lines:
                ctx.emit(line)
        elif op.kind == "expr":
            values = [self.need(d, ctx) for d in op.deps]
            var = f"{ctx.prefix}_{op.name}"
            ctx.emit(f"{var} = {op.template.format(*(v.expr for v in values))}")
            ctx.env[op.name] = expr.Value(var, op.dtype)
        elif op.kind == "load":  # GroupNorm's per-channel weight and bias
            source = op.deps[0]
            info = self.graph.info(source)
            cdt = expr.compute_dtype(info.dtype)
            widen = f".to({expr.TL_DTYPE[cdt]})" if cdt != info.dtype else ""
            self.channel_loads = True
            if "channel" not in ctx.env:
                ctx.emit(f"channel = (offs_m % {self.layout.groups})[:, None] * cpg + offs_n[None, :] // hw"
                         "  # the channel of each element")
                ctx.env["channel"] = expr.Value("channel", torch.int32)
            ctx.emit(f"x_{op.name} = tl.load(in_{source} + channel, mask=mask, other=0){widen}")
            ctx.env[op.name] = expr.Value(f"x_{op.name}", cdt)
        elif op.kind == "gather":
            self.write_gather(op, ctx)
        else:
            raise AssertionError(f"{op.kind} {op.name} is written by its pass")

    def write_gather(self, op: Op, ctx: Ctx) -> None:
        self.gathers += 1
        g = f"g{self.gathers}"
        index = self.need(op.deps[1], ctx)
        base = "base" if self.strided else "row_start"
        step = " * n_inner" if self.strided else ""
        ctx.emit(f"# {op.name}: the full-shape value {op.deps[0]} at one reduced index per row")
        ctx.emit(f"{g}_index = {index.expr}")
        ctx.emit(f"{g}_mask = {self.qmask} & ({g}_index >= 0) & ({g}_index < n_red)")
        ctx.emit(f"{g}_offs = {base} + {g}_index{step}")
        gctx = Ctx("gather", g, ctx.lines, ctx.pad, offs=f"{g}_offs", mask=f"{g}_mask", index=f"{g}_index")
        value = self.need(op.deps[0], gctx)
        ctx.emit(f"s_{op.name} = {value.expr}")
        ctx.env[op.name] = expr.Value(f"s_{op.name}", value.dtype)

    # -- the reductions -----------------------------------------------------------------------------------------
    def reduce_direct(self, op: Op, ctx: Ctx) -> None:
        """A reduction over a row held whole in registers."""
        src = self.need(op.deps[0], ctx).expr
        ax, r, t = self.axis, op.results, f"t_{op.name}"
        out = [f"s_{v}" for v in r]
        kind = op.reduce
        if kind == "sum":
            ctx.emit(f"{out[0]} = tl.sum(tl.where(mask, {src}, 0.0), axis={ax})")
        elif kind == "isum":
            ctx.emit(f"{out[0]} = tl.sum(tl.where(mask, {src}, 0).to(tl.int64), axis={ax})")
        elif kind in ("max", "min", "argmax", "argmin"):
            big = INF if kind.endswith("max") else INF[1:]
            fn = "tl.max" if kind.endswith("max") else "tl.min"
            value = out[0]
            ctx.emit(f"{t} = tl.where(mask, {src}, {big})")
            ctx.emit(f"{t}_nan = tl.max(({t} != {t}).to(tl.int32), axis={ax}) > 0  # NaN wins, as in PyTorch")
            ctx.emit(f"{value} = tl.where({t}_nan, {NAN}, {fn}({t}, axis={ax}))")
            if kind.startswith("arg"):
                hit = f"mask & (({t} == {self.bcast(value)}) | (({t} != {t}) & {self.bcast(t + '_nan')}))"
                ctx.emit(f"{t}_hit = {hit}")
                ctx.emit(f"{out[1]} = tl.min(tl.where({t}_hit, {self.bcast_n('offs_n')}, {INDEX_SENTINEL}), "
                         f"axis={ax}).to(tl.int64)  # the first index of the extremum")
        elif kind == "lse":
            # exp(x - max) is written as the softmax epilogue writes it, so the compiler computes it once.
            ctx.emit(f"{out[0]} = tl.max(tl.where(mask, {src}, {INF}), axis={ax})")
            ctx.emit(f"{out[1]} = tl.sum(tl.where(mask, tl.exp({src} - {self.bcast(out[0])}), 0.0), axis={ax})")
        elif kind == "welford":
            ctx.emit(f"{out[0]} = tl.sum(tl.where(mask, {src}, 0.0), axis={ax}) / n_red")
            ctx.emit(f"{t} = tl.where(mask, {src} - {self.bcast(out[0])}, 0.0)")
            ctx.emit(f"{out[1]} = tl.sum({t} * {t}, axis={ax})")
        else:
            raise AssertionError(kind)
        self.define(op)

    def reduce_init(self, op: Op) -> list[str]:
        a, out, kind = f"acc_{op.name}", [f"s_{v}" for v in op.results], op.reduce
        if kind == "sum":
            return [f"{a} = tl.zeros({self.tile}, tl.float32)"]
        if kind == "isum":
            return [f"{a} = tl.zeros({self.tile}, tl.int64)"]
        if kind in ("max", "min"):
            return [f"{a} = tl.full({self.tile}, {INF if kind == 'max' else INF[1:]}, tl.float32)"]
        if kind in ("argmax", "argmin"):
            return [f"{a} = tl.full({self.tile}, {INF if kind == 'argmax' else INF[1:]}, tl.float32)",
                    f"{a}_index = tl.full({self.tile}, {INDEX_SENTINEL}, tl.int32)"]
        if kind == "lse":
            return [f"{out[0]} = tl.full([BLOCK_M], {INF}, tl.float32)", f"{out[1]} = tl.zeros([BLOCK_M], tl.float32)"]
        if kind == "welford":
            return [f"{out[0]} = tl.zeros([BLOCK_M], tl.float32)", f"{out[1]} = tl.zeros([BLOCK_M], tl.float32)"]
        raise AssertionError(kind)

    def reduce_update(self, op: Op, ctx: Ctx) -> None:
        src = self.need(op.deps[0], ctx).expr
        ax, a, t, out, kind = self.axis, f"acc_{op.name}", f"t_{op.name}", [f"s_{v}" for v in op.results], op.reduce
        if kind == "sum":
            ctx.emit(f"{a} += tl.where(mask, {src}, 0.0)")
        elif kind == "isum":
            ctx.emit(f"{a} += tl.where(mask, {src}, 0).to(tl.int64)")
        elif kind in ("max", "min"):
            fn = "tl.maximum" if kind == "max" else "tl.minimum"
            ctx.emit(f"{a} = {fn}({a}, tl.where(mask, {src}, {INF if kind == 'max' else INF[1:]}), "
                     "propagate_nan=tl.PropagateNan.ALL)")
        elif kind in ("argmax", "argmin"):
            better = ">" if kind == "argmax" else "<"
            ctx.emit(f"{t} = tl.where(mask, {src}, {INF if kind == 'argmax' else INF[1:]})")
            ctx.emit(f"{t}_take = mask & (({t} {better} {a}) | ({a}_index == {INDEX_SENTINEL}) | "
                     f"(({t} != {t}) & ({a} == {a})))  # strictly better (or the first NaN): earlier index kept")
            ctx.emit(f"{a} = tl.where({t}_take, {t}, {a})")
            ctx.emit(f"{a}_index = tl.where({t}_take, {self.bcast_n('offs_n')}, {a}_index)")
        elif kind == "lse":
            ctx.emit(f"{t} = tl.where(mask, {src}, {INF})")
            ctx.emit(f"{t}_max = tl.maximum({out[0]}, tl.max({t}, axis={ax}))")
            ctx.emit(f"{t}_shift = tl.where({t}_max == {INF}, 0.0, {t}_max)  # rows with nothing yet stay finite")
            ctx.emit(f"{out[1]} = {out[1]} * tl.exp({out[0]} - {t}_shift) + "
                     f"tl.sum(tl.exp({t} - {self.bcast(t + '_shift')}), axis={ax})")
            ctx.emit(f"{out[0]} = {t}_max")
        elif kind == "welford":
            seen = "start" if self.lo == "0" else f"(start - {self.lo})"
            ctx.emit(f"{t}_n = tl.minimum({self.hi} - start, BLOCK_N) * 1.0  # elements of this chunk, per row")
            ctx.emit(f"{t}_seen = {seen} * 1.0  # elements merged so far (every earlier chunk was full)")
            ctx.emit(f"{t}_mean = tl.sum(tl.where(mask, {src}, 0.0), axis={ax}) / {t}_n")
            ctx.emit(f"{t} = tl.where(mask, {src} - {self.bcast(t + '_mean')}, 0.0)")
            ctx.emit(f"{t}_delta = {t}_mean - {out[0]}")
            ctx.emit(f"{out[0]} = {out[0]} + {t}_delta * ({t}_n / ({t}_seen + {t}_n))")
            ctx.emit(f"{out[1]} = {out[1]} + tl.sum({t} * {t}, axis={ax}) + "
                     f"{t}_delta * {t}_delta * ({t}_seen * {t}_n / ({t}_seen + {t}_n))")
        else:
            raise AssertionError(kind)

    def reduce_finish(self, op: Op) -> None:
        ax, a, t, out, kind = self.axis, f"acc_{op.name}", f"t_{op.name}", [f"s_{v}" for v in op.results], op.reduce
        emit = self.vec.emit
        if kind in ("sum", "isum"):
            emit(f"{out[0]} = tl.sum({a}, axis={ax})")
        elif kind in ("max", "min", "argmax", "argmin"):
            fn = "tl.max" if kind.endswith("max") else "tl.min"
            emit(f"{t}_nan = tl.max(({a} != {a}).to(tl.int32), axis={ax}) > 0  # NaN wins, as in PyTorch")
            emit(f"{out[0]} = tl.where({t}_nan, {NAN}, {fn}({a}, axis={ax}))")
            if kind.startswith("arg"):
                emit(f"{t}_hit = ({a}_index != {INDEX_SENTINEL}) & (({a} == {self.bcast(out[0])}) | "
                     f"(({a} != {a}) & {self.bcast(t + '_nan')}))")
                emit(f"{out[1]} = tl.min(tl.where({t}_hit, {a}_index, {INDEX_SENTINEL}), axis={ax}).to(tl.int64)"
                     "  # the first index of the extremum")
        self.define(op)

    def define(self, op: Op) -> None:
        for i, v in enumerate(op.results):
            self.vec.env[v] = expr.Value(f"s_{v}", result_dtype(op, i))

    # -- the kernel body ----------------------------------------------------------------------------------------
    def chunk_lines(self, start: str) -> list[str]:
        first = f"{start} + tl.arange(0, BLOCK_N)" if start != "0" else "tl.arange(0, BLOCK_N)"
        lines = [f"offs_n = {first}", f"mask_n = offs_n < {self.hi}"]
        if self.strided:
            lines += ["mask = mask_n[:, None] & mask_i[None, :]",
                      "if IDX64:",
                      "    offs = base[None, :] + offs_n[:, None].to(tl.int64) * n_inner",
                      "else:",
                      "    offs = base[None, :] + offs_n[:, None] * n_inner"]
        else:
            lines += ["mask = mask_m[:, None] & mask_n[None, :]", "offs = row_start[:, None] + offs_n[None, :]"]
        return lines

    def preamble(self) -> list[str]:
        if self.part == "combine":
            where = []
            if any(op.kind == "gather" for op in self.spec.ops):  # gathers address the input row by row
                where = ["base = (offs_q // n_inner) * (n_red * n_inner) + offs_q % n_inner"] if self.strided \
                    else ["row_start = offs_q * n_red"]
            return ["pid = tl.program_id(0)",
                    "offs_q = pid * BLOCK_M + tl.arange(0, BLOCK_M)  # outputs",
                    "mask_q = offs_q < n_q",
                    "if IDX64:",
                    "    offs_q = offs_q.to(tl.int64)",
                    *where,
                    "offs_s = tl.arange(0, BLOCK_S)  # the shares of each row",
                    "mask_s = offs_s < n_split",
                    "mask_p = mask_s[:, None] & mask_q[None, :]",
                    "at = offs_s[:, None] * n_q + offs_q[None, :]  # partial results, [share, output]"]
        lines = self._preamble()
        if self.part == "partial":
            lines += ["split = tl.program_id(1)  # this program's share of the reduced range",
                      "lo = split * per_split",
                      "hi = tl.minimum(lo + per_split, n_red)"]
        return lines

    def _preamble(self) -> list[str]:
        if self.strided:
            return ["pid = tl.program_id(0)",
                    "n_blocks = tl.cdiv(n_inner, BLOCK_M)",
                    "outer = pid // n_blocks",
                    "offs_i = (pid % n_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)  # inner (contiguous) index",
                    "mask_i = offs_i < n_inner",
                    "if IDX64:",
                    "    outer = outer.to(tl.int64)",
                    "offs_q = outer * n_inner + offs_i  # output index",
                    "base = outer * n_red * n_inner + offs_i  # first reduced element of each output"]
        return ["pid = tl.program_id(0)",
                "offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)  # rows",
                "mask_m = offs_m < n_out",
                "if IDX64:",
                "    offs_m = offs_m.to(tl.int64)",
                "row_start = offs_m * n_red"]

    def body(self) -> list[str]:
        spec, group = self.spec, self.group
        reduces = [op for op in spec.ops if op.kind == "reduce"]
        full_outputs = [o for o in group.outputs if spec.level(o) == FULL]
        vec_outputs = [o for o in group.outputs if spec.level(o) != FULL]
        n_reduce_passes = 1 + max(self.phase(op.deps[0]) for op in reduces)
        n_passes = max([n_reduce_passes] + [self.phase(o) + 1 for o in full_outputs])
        vec_ops = [op for op in spec.ops if op.level == VEC and op.kind != "reduce"]
        tile: Ctx | None = None
        if self.single:
            tile = Ctx("tile", "v", self.lines, "    ")
            self.vec.emit("# the whole row is in registers: every pass works on the same tile")
            for line in self.chunk_lines("0"):
                tile.emit(line)
        for p in range(n_passes):
            for op in vec_ops:
                if self.phase(op.name) <= p and op.name not in self.vec.env:
                    self.need(op.name, self.vec)
            pass_reduces = [op for op in reduces if self.phase(op.deps[0]) == p]
            stores = [o for o in full_outputs if self.phase(o) == p]
            what = [op.about for op in pass_reduces] + (["write " + ", ".join(stores)] if stores else [])
            self.vec.emit(f"# pass {p + 1} of {n_passes}: {'; '.join(what)}")
            if self.single:
                assert tile is not None
                for op in pass_reduces:
                    self.reduce_direct(op, tile)
                for o in stores:
                    self.store_full(o, tile)
                continue
            for op in pass_reduces:
                for line in self.reduce_init(op):
                    self.vec.emit(line)
            self.vec.emit(loop_header("start", "0", "n_red", "BLOCK_N", self.config))
            loop = Ctx("tile", "v", self.lines, "        ")
            for line in self.chunk_lines("start"):
                loop.emit(line)
            for op in pass_reduces:
                self.reduce_update(op, loop)
            for o in stores:
                self.store_full(o, loop)
            for op in pass_reduces:
                self.reduce_finish(op) if op.reduce not in ("lse", "welford") else self.define(op)
        return self.finish(vec_ops, vec_outputs)

    def finish(self, vec_ops: list[Op], vec_outputs: list[str]) -> list[str]:
        for op in vec_ops:
            if op.name not in self.vec.env:
                self.need(op.name, self.vec)
        for o in vec_outputs:
            value = self.need(o, self.vec)
            dtype = expr.TL_DTYPE[self.graph.info(o).dtype]
            self.vec.emit(f"tl.store(out_{o} + {self.q}, {value.expr}.to({dtype}), mask={self.qmask})")
        return self.preamble_lines() + self.lines_top + self.lines

    # -- strategy split: partial results per share of a row, then a combining kernel ----------------------------
    def workspace(self) -> list[tuple[str, torch.dtype]]:
        """The partial results the partial kernel writes: (value, dtype), one [n_split, n_q] buffer each."""
        return [(v, result_dtype(op, i))
                for op in self.spec.ops if op.kind == "reduce" for i, v in enumerate(op.results)]

    def body_partial(self) -> list[str]:
        reduces = [op for op in self.spec.ops if op.kind == "reduce"]
        self.vec.emit(f"# {'; '.join(op.about for op in reduces)}, over this program's share of each row")
        for op in reduces:
            for line in self.reduce_init(op):
                self.vec.emit(line)
        self.vec.emit(loop_header("start", self.lo, self.hi, "BLOCK_N", self.config))
        loop = Ctx("tile", "v", self.lines, "        ")
        for line in self.chunk_lines("start"):
            loop.emit(line)
        for op in reduces:
            self.reduce_update(op, loop)
        for op in reduces:
            self.reduce_finish(op) if op.reduce not in ("lse", "welford") else self.define(op)
        for v, _ in self.workspace():
            self.vec.emit(f"tl.store(ws_{v} + split * n_q + {self.q}, s_{v}, mask={self.qmask})")
        return self.preamble_lines() + self.lines_top + self.lines

    def body_combine(self) -> list[str]:
        emit = self.vec.emit
        for op in (op for op in self.spec.ops if op.kind == "reduce"):
            out, t, kind = [f"s_{v}" for v in op.results], f"t_{op.name}", op.reduce
            parts = [f"p_{v}" for v in op.results]
            emit(f"# {op.about}: merge the shares")
            if kind in ("sum", "isum"):
                zero = "0" if kind == "isum" else "0.0"
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other={zero})")
                emit(f"{out[0]} = tl.sum({parts[0]}, axis=0)")
            elif kind in ("max", "min", "argmax", "argmin"):
                big = INF if kind.endswith("max") else INF[1:]
                fn = "tl.max" if kind.endswith("max") else "tl.min"
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other={big})")
                emit(f"{t}_nan = tl.max(({parts[0]} != {parts[0]}).to(tl.int32), axis=0) > 0")
                emit(f"{out[0]} = tl.where({t}_nan, {NAN}, {fn}({parts[0]}, axis=0))")
                if kind.startswith("arg"):
                    emit(f"{parts[1]} = tl.load(ws_{op.results[1]} + at, mask=mask_p, other={INDEX_SENTINEL})")
                    emit(f"{t}_hit = ({parts[1]} != {INDEX_SENTINEL}) & (({parts[0]} == {out[0]}[None, :]) | "
                         f"(({parts[0]} != {parts[0]}) & {t}_nan[None, :]))")
                    emit(f"{out[1]} = tl.min(tl.where({t}_hit, {parts[1]}, {INDEX_SENTINEL}), axis=0)"
                         "  # earlier shares hold earlier indices")
            elif kind == "lse":
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other={INF})")
                emit(f"{parts[1]} = tl.load(ws_{op.results[1]} + at, mask=mask_p, other=0.0)")
                emit(f"{out[0]} = tl.max({parts[0]}, axis=0)")
                emit(f"{t}_shift = tl.where({out[0]} == {INF}, 0.0, {out[0]})")
                emit(f"{out[1]} = tl.sum({parts[1]} * tl.exp({parts[0]} - {t}_shift[None, :]), axis=0)")
            elif kind == "welford":
                emit(f"{parts[0]} = tl.load(ws_{op.results[0]} + at, mask=mask_p, other=0.0)")
                emit(f"{parts[1]} = tl.load(ws_{op.results[1]} + at, mask=mask_p, other=0.0)")
                emit(f"{t}_n = tl.minimum(tl.maximum(n_red - offs_s * per_split, 0), per_split) * 1.0"
                     "  # elements in each share")
                emit(f"{out[0]} = tl.sum({t}_n[:, None] * {parts[0]}, axis=0) / n_red")
                emit(f"{t}_d = {parts[0]} - {out[0]}[None, :]")
                emit(f"{out[1]} = tl.sum({parts[1]} + {t}_n[:, None] * {t}_d * {t}_d, axis=0)  # Chan et al.")
            self.define(op)
        vec_ops = [op for op in self.spec.ops if op.level == VEC and op.kind != "reduce"]
        return self.finish(vec_ops, list(self.group.outputs))

    def preamble_lines(self) -> list[str]:
        return ["    " + line for line in self.preamble()]

    def store_full(self, name: str, ctx: Ctx) -> None:
        value = self.need(name, ctx)
        dtype = expr.TL_DTYPE[self.graph.info(name).dtype]
        ctx.emit(f"tl.store(out_{name} + offs, {value.expr}.to({dtype}), mask=mask)")

