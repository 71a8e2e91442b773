"""Family 3 — scans: ``aten.cumsum`` and ``aten.cumprod`` along one dimension, with the pointwise prologue that
produces the scanned value and the pointwise epilogue that consumes the result fused into the same kernel.

The tensor is seen as ``[outer, L, inner]`` (``L`` the scanned dimension). Two kernel shapes, chosen by structure:

- **rows** (the last dimension, ``inner == 1``): each program takes ``ROWS`` rows and walks them left to right,
  ``BLOCK_N`` columns at a time: ``tl.cumsum`` (or ``tl.associative_scan`` with a product) inside the tile plus a
  running total per row carried from tile to tile. Short rows are packed several to a program, so a
  ``[100000, 7]`` problem does not launch 100000 mostly idle programs.
- **columns** (an inner dimension): each program takes one outer index and ``BLOCK_I`` neighbouring inner columns,
  and walks down ``L`` in ``[BLOCK_L, BLOCK_I]`` tiles scanned along axis 0. Loads stay coalesced along the
  contiguous inner dimension; a running total per column is carried down.

Accumulation is fp32 for half and fp32 inputs, fp64 for fp64, int64 for integers and bools (PyTorch's cumsum and
cumprod of an integer tensor are int64). Operands are read *flat* (contiguous, the result's shape), as a
*scalar*, or *strided* (broadcast or non-contiguous: per-dimension indices times the operand's strides), as the
pointwise family does; the result is written contiguous.
"""

from __future__ import annotations

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    epilogue_chain,
    live_dims,
    make_group,
    operand_mode,
    prologue_chain,
)
from kernelwright.generate.graph import Node, ProblemGraph

NAME = "scan"
SCAN_OPS = ("cumsum", "cumprod")
_IDENTITY = {"cumsum": "0", "cumprod": "1"}


def _scan_dim(node: Node, rank: int) -> int:
    dim = node.args[1] if len(node.args) > 1 else node.kwargs["dim"]
    return dim % rank


def _out_dtype(node: Node) -> torch.dtype:
    assert node.info is not None
    return node.info.dtype


class ScanFamily:
    name = NAME

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str]) -> Group | None:
        if node.name in claimed or node.op not in SCAN_OPS or node.info is None or not node.info.shape:
            return None
        source = node.args[0]
        if not hasattr(source, "name") or source.name not in graph.values:
            return None
        in_dtype, out_dtype = graph.info(source.name).dtype, _out_dtype(node)
        if out_dtype not in expr.TL_DTYPE or in_dtype not in expr.TL_DTYPE or out_dtype == torch.bool:
            return None
        if in_dtype.is_floating_point and not out_dtype.is_floating_point:
            return None  # cumsum(float, dtype=int) truncates first; rare, left to PyTorch
        shape = node.info.shape
        dim = _scan_dim(node, len(shape))
        epilogue = epilogue_chain(graph, node.name, claimed)
        prologue = prologue_chain(graph, source.name, claimed, shape=shape)
        for nodes in ([*prologue, node.name, *epilogue], [node.name, *epilogue]):
            group = make_group(graph, NAME, nodes, anchor=node.name, shape=tuple(shape), dim=dim, op=node.op,
                               source=source.name)
            if group.inputs and _broadcast_shape(graph, group) == tuple(shape):
                return group
        return None  # a scan of a constant: nothing to read

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        # Memory-bound, one pass. BLOCK is the tile in elements (the launcher narrows it to the row length and
        # packs short rows); the defaults are leads until timed on the H200.
        shape, dim = group.detail["shape"], group.detail["dim"]
        if dim == len(shape) - 1:
            return [{"BLOCK": b, "num_warps": w} for b, w in ((1024, 4), (2048, 8), (4096, 8), (4096, 16), (512, 4))]
        # Inner-dim scans: COLS neighbouring columns per program (>= 32 fp32 = one 128-byte line per row of the
        # tile); fewer columns give more programs when outer * inner is small.
        return [{"BLOCK": b, "COLS": c, "num_warps": w}
                for b, c, w in ((2048, 32, 4), (4096, 64, 8), (1024, 16, 4), (2048, 64, 4), (8192, 128, 8))]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return _Renderer(graph, group, config, ident).render()


def _broadcast_shape(graph: ProblemGraph, group: Group) -> tuple[int, ...]:
    shapes = [graph.info(v).shape for v in group.inputs] + _constant_shapes(graph, group)
    return tuple(torch.broadcast_shapes(*shapes))


def _constant_shapes(graph: ProblemGraph, group: Group) -> list[tuple[int, ...]]:
    return [tuple(graph.info(n).shape) for n in group.nodes
            if graph.node(n).op in expr.CONSTANT_OPS and graph.info(n).numel > 1]


class _Renderer:
    """Source for one scan group and one configuration."""

    def __init__(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> None:
        self.graph, self.group, self.config, self.ident = graph, group, config, ident
        self.shape: tuple[int, ...] = tuple(group.detail["shape"])
        self.dim: int = group.detail["dim"]
        self.op: str = group.detail["op"]
        self.rows = self.dim == len(self.shape) - 1  # the scanned dimension is the contiguous one
        self.anchor = graph.node(group.anchor or "")
        self.acc = expr.compute_dtype(_out_dtype(self.anchor))
        self.modes = {v: operand_mode(graph.info(v), self.shape) for v in group.inputs}
        self.strided = [v for v in group.inputs if self.modes[v] == "strided"]

    # -- the kernel ------------------------------------------------------------------------------------------
    def _index_lines(self, outer: str, inner: str) -> list[str]:
        """Per-dimension indices (``idx_k``) that strided operands need, from the outer and inner flat indices."""
        needed = sorted({d for v in self.strided for d in live_dims(self.graph.info(v).shape, self.shape)}
                        - {self.dim})
        lines = []
        for dims, flat in ((range(self.dim), outer), (range(self.dim + 1, len(self.shape)), inner)):
            divisor = ""
            for d in reversed(dims):
                if d in needed:
                    quotient = f"({flat} // {divisor})" if divisor else flat
                    # The first dimension of a range needs no modulo: the flat index is below the range's size.
                    lines.append(f"idx_{d} = {quotient}" + ("" if d == dims[0] else f" % size_{d}"))
                divisor = f"size_{d}" if not divisor else f"{divisor} * size_{d}"
        return lines

    def _base(self, v: str, flat_base: str) -> tuple[str, str]:
        """An operand's offset without the scanned index, and the step of the scanned index: "1", a stride, or
        "" when the operand is broadcast along the scanned dimension."""
        if self.modes[v] == "flat":
            return flat_base, "1" if self.rows else "n_inner"
        dims = live_dims(self.graph.info(v).shape, self.shape)
        base = " + ".join(f"idx_{d} * stride_{v}_{d}" for d in dims if d != self.dim)
        if not base:  # it varies along the scanned dimension only: a vector of zeros of the program's shape
            base = "0 * rows" if self.rows else "0 * inner"
        return base, f"stride_{v}_{self.dim}" if self.dim in dims else ""

    def _kernel(self) -> list[str]:
        graph, group = self.graph, self.group
        rows = self.rows
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

        acc_tl = expr.TL_DTYPE[self.acc]
        identity = _IDENTITY[self.op]
        if rows:
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
            flat_base, scan_axis, carry_shape = "row_start", 1, "[ROWS]"
            out_offset = "row_start[:, None] + cols[None, :]"
        else:
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
            flat_base, scan_axis, carry_shape = "column_start", 0, "[BLOCK_I]"
            out_offset = "column_start[None, :] + (steps * n_inner)[:, None]"

        # Operands that do not vary along the scan are loaded once, before the loop, as one row (or column).
        loop: list[str] = []
        env: dict[str, expr.Value] = {}
        for v in group.inputs:
            info = graph.info(v)
            if self.modes[v] == "scalar":
                load, target = f"tl.load(in_{v})", body
            else:
                base, step = self._base(v, flat_base)
                if base != flat_base:
                    body.append(f"base_{v} = {base}")
                    base = f"base_{v}"
                if not step:
                    ptr, mask, target = (f"{base}[:, None]", "row_mask[:, None]", body) if rows else \
                        (f"{base}[None, :]", "inner_mask[None, :]", body)
                elif rows:
                    along = "cols[None, :]" if step == "1" else f"(cols * {step})[None, :]"
                    ptr, mask, target = f"{base}[:, None] + {along}", "mask", loop
                else:
                    ptr, mask, target = f"{base}[None, :] + (steps * {step})[:, None]", "mask", loop
                load = f"tl.load(in_{v} + ({ptr}), mask={mask}, other=0)"
            cdt = expr.compute_dtype(info.dtype)
            if cdt != info.dtype:
                load += f".to({expr.TL_DTYPE[cdt]})"
            target.append(f"x_{v} = {load}")
            env[v] = expr.Value(f"x_{v}", cdt)
        if self.op == "cumsum":
            body.append(f"carry = tl.zeros({carry_shape}, dtype={acc_tl})  # the running total of every "
                        f"{'row' if rows else 'column'}")
        else:
            body.append(f"carry = tl.full({carry_shape}, 1, dtype={acc_tl})  # the running product of every "
                        f"{'row' if rows else 'column'}")
        if rows:
            body.append("for start in range(0, n_cols, BLOCK_N):")
            loop[:0] = ["cols = start + lanes", "mask = row_mask[:, None] & (cols < n_cols)[None, :]"]
        else:
            body.append("for start in range(0, n_scan, BLOCK_L):")
            loop[:0] = ["steps = start + lanes", "mask = (steps < n_scan)[:, None] & inner_mask[None, :]"]

        members = [graph.node(n) for n in group.nodes]
        anchor_index = next(i for i, n in enumerate(members) if n.name == self.anchor.name)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all(members[:anchor_index], env)
        loop += emitter.lines
        source = env[group.detail["source"]]
        value = self._to_scanned_type(source)
        loop.append(f"x = tl.where(mask, {value}, {identity})  # the identity in the padding lanes")
        if self.op == "cumsum":
            loop.append(f"scanned = tl.cumsum(x, axis={scan_axis}) + carry{self._expand(scan_axis)}")
            loop.append(f"carry += tl.sum(x, axis={scan_axis})")
        else:
            loop.append(f"scanned = tl.associative_scan(x, {scan_axis}, {self.ident}_mul) * "
                        f"carry{self._expand(scan_axis)}")
            loop.append(f"carry *= tl.reduce(x, {scan_axis}, {self.ident}_mul)")
        env[self.anchor.name] = expr.Value("scanned", self.acc)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all(members[anchor_index + 1:], env)
        loop += emitter.lines
        for o in group.outputs:
            dtype = graph.info(o).dtype
            loop.append(f"tl.store(out_{o} + ({out_offset}), {env[o].expr}.to({expr.TL_DTYPE[dtype]}), mask=mask)")
        body += [f"    {line}" for line in loop]

        lines = []
        if self.op == "cumprod":
            lines += ["@triton.jit", f"def {self.ident}_mul(a, b):", "    return a * b", "", ""]
        lines += ["@triton.jit", f"def {self.ident}_kernel({', '.join(params)}):"]
        what = "ROWS rows, BLOCK_N columns at a time" if rows else "BLOCK_I columns of one outer index, BLOCK_L " \
                                                                    "steps at a time"
        lines.append(f'    """{self.op} along dim {self.dim}: each program scans {what}, carrying the running '
                     f'{"total" if self.op == "cumsum" else "product"} from tile to tile."""')
        lines += [f"    {line}" for line in body]
        return lines

    def _to_scanned_type(self, value: expr.Value) -> str:
        """The scanned value in the accumulation type; a dtype= argument narrower than the input rounds first,
        as PyTorch converts the input before scanning."""
        out = _out_dtype(self.anchor)
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
        shapes = [f"{v}.shape" for v in group.inputs] + [repr(s) for s in _constant_shapes(graph, group)]
        lines.append(f"    shape = torch.broadcast_shapes({', '.join(shapes)})")
        for v in group.inputs:
            if self.modes[v] == "flat":
                lines.append(f"    if not ({v}.is_contiguous() and {v}.shape == shape):")
                lines.append(f"        {v} = {v}.expand(shape).contiguous()")
            elif self.modes[v] == "strided":
                lines.append(f"    {v} = {v}.expand(shape)")
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
                f"    block_n = min({config['BLOCK']}, triton.next_power_of_2(n_cols))",
                f"    rows = min({config['BLOCK']} // block_n, triton.next_power_of_2(n_rows))",
            ]
            args += ["n_rows", "n_cols"]
            grid = "(triton.cdiv(n_rows, rows),)"
            tile = "ROWS=rows, BLOCK_N=block_n"
        else:
            lines += [
                f"    n_outer, n_scan, n_inner = math.prod(shape[:{d}]), shape[{d}], math.prod(shape[{d + 1}:])",
                "    # The tile holds BLOCK elements: up to COLS neighbouring columns (coalesced), and as many steps",
                "    # of the scan as then fit.",
                f"    block_i = min({config['COLS']}, triton.next_power_of_2(n_inner))",
                f"    block_l = min({config['BLOCK']} // block_i, triton.next_power_of_2(n_scan))",
            ]
            args += ["n_outer", "n_scan", "n_inner"]
            grid = "(n_outer * triton.cdiv(n_inner, block_i),)"
            tile = "BLOCK_L=block_l, BLOCK_I=block_i"
        if self.strided:
            args.append("*shape")
            args += [f"*{v}.stride()" for v in self.strided]
        lines.append(f"    {kernel}[{grid}]({', '.join(args)}, {tile}, IDX64=math.prod(shape) >= 2**31, "
                     f"num_warps={config['num_warps']})")
        lines.append(f"    return ({outs},)")
        return lines

    def render(self) -> Rendered:
        source = "\n".join([*self._kernel(), "", "", *self._launcher()])
        notes = () if self.rows else ("inner-dim scan: parallel over outer x inner columns only",)
        return Rendered(source=source, launcher=self.ident, notes=notes)
