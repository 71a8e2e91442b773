"""The source of a scan group: one kernel that walks the scanned dimension tile by tile, carrying the running total
(or product), and its launcher."""

from __future__ import annotations

from kernelwright.generate import expr
from kernelwright.generate.families import base
from kernelwright.generate.families.base import Group, Rendered
from kernelwright.generate.families.scan.config import ScanConfig
from kernelwright.generate.families.scan.growing import constant_shapes
from kernelwright.generate.families.scan.matching import out_dtype
from kernelwright.generate.graph import ProblemGraph

_IDENTITY = {"cumsum": "0", "cumprod": "1"}


def write(graph: ProblemGraph, group: Group, config: ScanConfig, ident: str) -> Rendered:
    return _Writer(graph, group, config, ident).render()


class _Writer:
    """Source for one scan group and one configuration."""

    def __init__(self, graph: ProblemGraph, group: Group, config: ScanConfig, ident: str) -> None:
        self.graph, self.group, self.config, self.ident = graph, group, config, ident
        self.shape: tuple[int, ...] = tuple(group.detail["shape"])
        self.dim: int = group.detail["dim"]
        self.op: str = group.detail["op"]
        self.rows = self.dim == len(self.shape) - 1  # the scanned dimension is the contiguous one
        self.anchor = graph.node(group.anchor or "")
        self.acc = expr.compute_dtype(out_dtype(self.anchor))
        # A reverse scan (flip, scan, flip): the kernel walks the dimension from its end; the flips are not computed.
        self.flips: tuple[str, ...] = tuple(group.detail.get("flips", ()))
        self.reverse = bool(self.flips)
        # An exclusive scan (cat of the identity and the scan of x without its last step): the source is read one
        # step behind, the identity in front of it; the slice, the identity and the cat are not computed.
        self.exclusive: tuple[str, ...] = tuple(group.detail.get("exclusive", ()))
        self.modes = {v: base.operand_mode(graph.info(v), self.shape) for v in group.inputs}
        self.strided = [v for v in group.inputs if self.modes[v] == "strided"]

    # -- the kernel ------------------------------------------------------------------------------------------
    def _index_lines(self, outer: str, inner: str) -> list[str]:
        """Per-dimension indices (``idx_k``) that strided operands need, from the outer and inner flat indices."""
        needed = sorted({d for v in self.strided for d in base.live_dims(self.graph.info(v).shape, self.shape)}
                        - {self.dim})
        lines = []
        for dims, flat in ((range(self.dim), outer), (range(self.dim + 1, len(self.shape)), inner)):
            divisor = ""
            for d in reversed(dims):
                if d in needed:
                    quotient = f"({flat} // {divisor})" if divisor else flat
                    # The first dimension of a range needs no modulo: the flat index is below the range's size.
                    lines.append(f"idx_{d} = {quotient}" + ("" if d == dims[0] else f" % size_{d}"))
                # Parenthesised: "rows // (size_2 * size_1)", not "rows // size_2 * size_1" (level 3's Mamba2
                # read out of bounds through that, 2026-12-03).
                divisor = f"size_{d}" if not divisor else f"({divisor.strip('()')} * size_{d})"
        return lines

    def _base(self, v: str, flat_base: str) -> tuple[str, str]:
        """An operand's offset without the scanned index, and the step of the scanned index: "1", a stride, or
        "" when the operand is broadcast along the scanned dimension."""
        if self.modes[v] == "flat":
            return flat_base, "1" if self.rows else "n_inner"
        dims = base.live_dims(self.graph.info(v).shape, self.shape)
        offset = " + ".join(f"idx_{d} * stride_{v}_{d}" for d in dims if d != self.dim)
        if not offset:  # it varies along the scanned dimension only: a vector of zeros of the program's shape
            offset = "0 * rows" if self.rows else "0 * inner"
        return offset, f"stride_{v}_{self.dim}" if self.dim in dims else ""

    def _params(self) -> list[str]:
        group, rows = self.group, self.rows
        params = [f"in_{v}" for v in group.inputs] + [f"out_{o}" for o in group.outputs]
        params += ["n_rows", "n_cols"] if rows else ["n_outer", "n_scan", "n_inner"]
        if self.strided:
            params += [f"size_{d}" for d in range(len(self.shape))]
            for v in self.strided:
                params += [f"stride_{v}_{d}" for d in range(len(self.shape))]
        if rows:
            params += ["ROWS: tl.constexpr", "BLOCK_N: tl.constexpr"]
        else:
            params += ["BLOCK_L: tl.constexpr", "BLOCK_I: tl.constexpr"]
        params.append("IDX64: tl.constexpr")
        return params

    def _preamble(self) -> tuple[list[str], str, int, str, str]:
        """The program's rows (or columns) and where they start: (lines, the flat base of a contiguous operand,
        the tile's scanned axis, the carry's shape, the output offsets)."""
        if self.rows:
            body = [
                "rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)",
                "lanes = tl.arange(0, BLOCK_N)",
                "if IDX64:",
                "    rows = rows.to(tl.int64)",
                "    lanes = lanes.to(tl.int64)",
                "row_mask = rows < n_rows",
            ]
            body.append("row_start = rows * n_cols  # where each row begins in a contiguous tensor")
            body += self._index_lines("rows", "")
            return body, "row_start", 1, "[ROWS]", "row_start[:, None] + cols[None, :]"
        body = [
            "pid = tl.program_id(0)",
            "n_blocks = tl.cdiv(n_inner, BLOCK_I)",
            "outer = pid // n_blocks",
            "inner = (pid % n_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)",
            "lanes = tl.arange(0, BLOCK_L)",
            "if IDX64:",
            "    outer = outer.to(tl.int64)",
            "    inner = inner.to(tl.int64)",
            "    lanes = lanes.to(tl.int64)",
            "inner_mask = inner < n_inner",
        ]
        body.append("column_start = outer * n_scan * n_inner + inner  # each column's first element, contiguous")
        body += self._index_lines("outer", "inner")
        return body, "column_start", 0, "[BLOCK_I]", "column_start[None, :] + (steps * n_inner)[:, None]"

    def _loads(self, body: list[str], loop: list[str], flat_base: str) -> dict[str, expr.Value]:
        """Operand loads: those that do not vary along the scan go before the loop (``body``), as one row (or
        column); the others into the loop. The values they define."""
        rows = self.rows
        env: dict[str, expr.Value] = {}
        for v in self.group.inputs:
            info = self.graph.info(v)
            if self.modes[v] == "scalar":
                load, target = f"tl.load(in_{v})", body
            else:
                start, step = self._base(v, flat_base)
                if start != flat_base:
                    body.append(f"base_{v} = {start}")
                    start = f"base_{v}"
                if not step:
                    ptr, mask, target = (f"{start}[:, None]", "row_mask[:, None]", body) if rows else \
                        (f"{start}[None, :]", "inner_mask[None, :]", body)
                elif rows:
                    at = "(cols - 1)" if self.shifted(v) else "cols"
                    along = f"{at}[None, :]" if step == "1" else f"({at} * {step})[None, :]"
                    ptr, mask, target = f"{start}[:, None] + {along}", "mask", loop
                else:
                    at = "(steps - 1)" if self.shifted(v) else "steps"
                    ptr, mask, target = f"{start}[None, :] + ({at} * {step})[:, None]", "mask", loop
                other = "0"
                if self.shifted(v):  # one step behind: the identity in front of the first element
                    first = "cols >= 1" if rows else "steps >= 1"
                    mask = f"{mask} & ({first}){'[None, :]' if rows else '[:, None]'}"
                    other = _IDENTITY[self.op]
                load = f"tl.load(in_{v} + ({ptr}), mask={mask}, other={other})"
            line, env[v] = base.load_line(v, load, info.dtype)
            target.append(line)
        return env

    def shifted(self, v: str) -> bool:
        """Whether operand ``v`` is read one step behind (an exclusive scan's source)."""
        return bool(self.exclusive) and v == self.group.detail["source"]

    def _scan_step(self, env: dict[str, expr.Value], scan_axis: int, out_offset: str) -> list[str]:
        """One tile inside the loop: the prologue, the scan with the carry, the epilogue and the stores."""
        graph, group = self.graph, self.group
        members = [graph.node(n) for n in group.nodes if n not in self.flips and n not in self.exclusive]
        anchor_index = next(i for i, n in enumerate(members) if n.name == self.anchor.name)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all(members[:anchor_index], env)
        loop = list(emitter.lines)
        source = env[group.detail["source"]]
        value = self._to_scanned_type(source)
        loop.append(f"x = tl.where(mask, {value}, {_IDENTITY[self.op]})  # the identity in the padding lanes")
        reverse = ", reverse=True" if self.reverse else ""
        if self.op == "cumsum":
            loop.append(f"scanned = tl.cumsum(x, axis={scan_axis}{reverse}) + carry{self._expand(scan_axis)}")
            loop.append(f"carry += tl.sum(x, axis={scan_axis})")
        else:
            loop.append(f"scanned = tl.associative_scan(x, {scan_axis}, {self.ident}_mul{reverse}) * "
                        f"carry{self._expand(scan_axis)}")
            loop.append(f"carry *= tl.reduce(x, {scan_axis}, {self.ident}_mul)")
        env[self.anchor.name] = expr.Value("scanned", self.acc)
        if self.reverse:
            env[self.flips[1]] = env[self.anchor.name]  # flip(scan(flip(x))): the reverse scan, in place
        if self.exclusive:
            env[self.exclusive[-1]] = env[self.anchor.name]  # the cat: the scan of the shifted source
        emitter = expr.PointwiseEmitter()
        emitter.emit_all(members[anchor_index + 1:], env)
        loop += emitter.lines
        for o in group.outputs:
            dtype = graph.info(o).dtype
            loop.append(f"tl.store(out_{o} + ({out_offset}), {env[o].expr}.to({expr.TL_DTYPE[dtype]}), mask=mask)")
        return loop

    def _kernel(self) -> list[str]:
        rows = self.rows
        body, flat_base, scan_axis, carry_shape, out_offset = self._preamble()
        loop: list[str] = []
        env = self._loads(body, loop, flat_base)
        acc_tl = expr.TL_DTYPE[self.acc]
        if self.op == "cumsum":
            body.append(f"carry = tl.zeros({carry_shape}, dtype={acc_tl})  # the running total of every "
                        f"{'row' if rows else 'column'}")
        else:
            body.append(f"carry = tl.full({carry_shape}, 1, dtype={acc_tl})  # the running product of every "
                        f"{'row' if rows else 'column'}")
        length, tile = ("n_cols", "BLOCK_N") if rows else ("n_scan", "BLOCK_L")
        head = []
        if self.reverse:  # from the last tile to the first, each scanned from its end
            body.append(base.loop_header("back", "0", length, tile, self.config))
            head.append(f"start = ({length} - 1) // {tile} * {tile} - back")
        else:
            body.append(base.loop_header("start", "0", length, tile, self.config))
        if rows:
            head += ["cols = start + lanes", "mask = row_mask[:, None] & (cols < n_cols)[None, :]"]
        else:
            head += ["steps = start + lanes", "mask = (steps < n_scan)[:, None] & inner_mask[None, :]"]
        loop[:0] = head
        loop += self._scan_step(env, scan_axis, out_offset)
        body += [f"    {line}" for line in loop]

        lines = []
        if self.op == "cumprod":
            lines += ["@triton.jit", f"def {self.ident}_mul(a, b):", "    return a * b", "", ""]
        lines += ["@triton.jit", f"def {self.ident}_kernel({', '.join(self._params())}):"]
        what = "ROWS rows, BLOCK_N columns at a time" if rows else "BLOCK_I columns of one outer index, BLOCK_L " \
                                                                    "steps at a time"
        lines.append(f'    """{self.op} along dim {self.dim}: each program scans {what}, carrying the running '
                     f'{"total" if self.op == "cumsum" else "product"} from tile to tile."""')
        lines += [f"    {line}" for line in body]
        return lines

    def _to_scanned_type(self, value: expr.Value) -> str:
        """The scanned value in the accumulation type; a dtype= argument narrower than the input rounds first,
        as PyTorch converts the input before scanning."""
        out = out_dtype(self.anchor)
        in_dtype = self.graph.info(self.group.detail["source"]).dtype
        if in_dtype != out and out.itemsize < in_dtype.itemsize and out.is_floating_point:
            return f"{value.expr}.to({expr.TL_DTYPE[out]}).to({expr.TL_DTYPE[self.acc]})"
        if value.dtype == self.acc:
            return value.expr
        return f"{value.expr}.to({expr.TL_DTYPE[self.acc]})"

    @staticmethod
    def _expand(axis: int) -> str:
        return "[:, None]" if axis == 1 else "[None, :]"

    # -- the launcher ----------------------------------------------------------------------------------------
    def _launcher(self) -> list[str]:
        graph, group, config = self.graph, self.group, self.config
        kernel = f"{self.ident}_kernel"
        ops = ", ".join(graph.node(n).op for n in group.nodes)
        lines = [f"def {self.ident}({', '.join(group.inputs)}):"]
        lines.append(f'    """{ops}, fused: {self.op} along dim {self.dim} in one pass (read once, write once)."""')
        shapes = [f"{v}.shape" for v in group.inputs] + [repr(s) for s in constant_shapes(graph, group)]
        lines.append(f"    shape = torch.broadcast_shapes({', '.join(shapes)})")
        lines += base.operand_layout_lines(group.inputs, self.modes)
        device = group.inputs[0]
        for o in group.outputs:
            lines.append(f"    out_{o} = torch.empty(shape, dtype={graph.info(o).dtype}, device={device}.device)")
        outs = ", ".join(f"out_{o}" for o in group.outputs)
        lines.append("    if math.prod(shape) == 0:")
        lines.append(f"        return ({outs},)")
        args = [*group.inputs, *(f"out_{o}" for o in group.outputs)]
        d = self.dim
        if self.rows:
            lines += [
                f"    n_cols = shape[{d}]",
                "    n_rows = math.prod(shape) // max(n_cols, 1)",
                "    # The tile holds BLOCK elements: as many columns as the row has (up to BLOCK), and as many rows",
                "    # as then fit, so short rows share a program.",
                f"    block_n = min({config.BLOCK}, triton.next_power_of_2(n_cols))",
                f"    rows = min({config.BLOCK} // block_n, triton.next_power_of_2(n_rows))",
            ]
            args += ["n_rows", "n_cols"]
            grid = "(triton.cdiv(n_rows, rows),)"
            tile = "ROWS=rows, BLOCK_N=block_n"
        else:
            lines += [
                f"    n_outer, n_scan, n_inner = math.prod(shape[:{d}]), shape[{d}], math.prod(shape[{d + 1}:])",
                "    # The tile holds BLOCK elements: up to COLS neighbouring columns (coalesced), and as many steps",
                "    # of the scan as then fit.",
                f"    block_i = min({config.COLS}, triton.next_power_of_2(n_inner))",
                f"    block_l = min({config.BLOCK} // block_i, triton.next_power_of_2(n_scan))",
            ]
            args += ["n_outer", "n_scan", "n_inner"]
            grid = "(n_outer * triton.cdiv(n_inner, block_i),)"
            tile = "BLOCK_L=block_l, BLOCK_I=block_i"
        args += base.strided_args(self.strided)
        lines.append(f"    {kernel}[{grid}]({', '.join(args)}, {tile}, IDX64=math.prod(shape) >= 2**31, "
                     f"num_warps={config.num_warps})")
        lines.append(f"    return ({outs},)")
        return lines

    def render(self) -> Rendered:
        source = "\n".join([*self._kernel(), "", "", *self._launcher()])
        notes = () if self.rows else ("inner-dim scan: parallel over outer x inner columns only",)
        return Rendered(source=source, launcher=self.ident, notes=notes)
