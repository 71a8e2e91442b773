"""The source of a GEMM group: one tiled ``tl.dot`` kernel in grouped program order with the epilogue computed on
the fp32 accumulator tile, and a launcher that replays the operands' glue with sizes read at run time."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import (
    SM_COUNT_SOURCE,
    TMA_READY_SOURCE,
    Group,
    Rendered,
    load_line,
)
from kernelwright.generate.families.gemm.config import GemmConfig
from kernelwright.generate.families.gemm.matching import GLUE_RESHAPES
from kernelwright.generate.families.gemm.model import Atom, Dim, GemmPlan, Operand, dim_size
from kernelwright.generate.graph import ProblemGraph

_GRID_Y_MAX = 65535  # CUDA's limit on the second grid axis (the batch)


# A row stride that is not a multiple of 16 bytes (K = 999, say) rules out 16-byte cp.async: Triton then loads
# 16-bit operands with scalar LDGs, unpipelined, holding prefetched stages in registers (sm_90a cross-compiles
# of a 1000x999x1001 bf16 GEMM: 255 registers and 20-642 spilled words a thread, against 122-222 registers and
# no spills aligned). Above this many multiply-adds the launcher copies such an operand once into rows padded
# to 16 bytes, and the K loop runs at full speed. The threshold is a lead until timed.
_PAD_MIN_MACS = 2**24


def write(graph: ProblemGraph, group: Group, config: GemmConfig, ident: str) -> Rendered:
    return _Writer(graph, group, config, ident).render()


def _mode(graph: ProblemGraph, value: str, level: Sequence[int],
          anchor: Sequence[int]) -> tuple[str, bool, bool]:
    """How an epilogue operand is read: "scalar", "row" (varies along N only: a bias), "col" (along M only:
    a per-row scale) or "tile"; and whether that assumed a broadcast along M (resp. N) that a traced size of
    1 hides."""
    info = graph.info(value)
    if info.numel == 1:
        return "scalar", False, False
    meta = torch.empty_strided(info.shape, info.stride, device="meta")
    strides = meta.expand(tuple(level)).reshape(tuple(anchor)).stride()
    m, n = anchor[-2], anchor[-1]
    if not (m > 1 and strides[-2] != 0):
        return "row", m == 1, False
    if not (n > 1 and strides[-1] != 0):
        return "col", False, n == 1
    return "tile", False, False


_ALIGNED = '''\
def {ident}_aligned(t):
    """``t`` where Triton can tell its rows start 16-byte aligned, else a copy with rows padded to a multiple of
    16 elements (the padding is never read: the kernel masks M, N and K). Triton specializes an integer argument
    only on divisibility by 16, so a row stride of 4 floats (16 bytes, but not known to be) still compiles to 4-byte
    loads. Alignment is judged from the storage offset (allocations start 16-byte aligned), not ``data_ptr()``, so
    that torch.compile can trace this with fake tensors."""
    step = max(16, 16 // t.element_size())
    strides = [s for s, n in zip(t.stride(), t.shape) if n > 1]
    unit = [s for s in strides if s == 1]
    if t.storage_offset() % step == 0 and len(unit) <= 1 and all(s == 1 or s % step == 0 for s in strides):
        return t
    rows = torch.empty((*t.shape[:-1], -(-t.shape[-1] // step) * step), dtype=t.dtype, device=t.device)
    return rows[..., : t.shape[-1]].copy_(t)'''

# 3xTF32's operands, K-major (gemm/family.py has why), with a K the kernel's mask keeps in runs of 16 elements.
_K_MAJOR = '''\
@triton.jit
def {ident}_k_major_copy(src, dst, R, K, ROW, s_b, s_r, s_k, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    # dst[b, r, k] = src[b, r, k] for k < K, 0 up to ROW: a tiled transposing copy (Triton stages the tile
    # through shared memory between the read's and the write's contiguous axes).
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    bid = tl.program_id(2).to(tl.int64)
    rows = r[:, None].to(tl.int64)
    x = tl.load(src + bid * s_b + rows * s_r + k[None, :] * s_k, mask=(r[:, None] < R) & (k[None, :] < K), other=0.0)
    tl.store(dst + bid * R * ROW + rows * ROW + k[None, :], x, mask=(r[:, None] < R) & (k[None, :] < ROW))


def {ident}_k_major(a, b, pad):
    """A (..., M, K) and B (..., K, N) as the 3xTF32 kernel reads them, and the K to give it: each operand with K
    contiguous and its rows 16-element aligned. An operand laid out otherwise is copied once by the tiled kernel
    above, in this forward's time (PyTorch's own transposing copy of a 524288 x 256 B took 3.42 ms, a plain copy
    of it 0.26; H200, 2026-12-04). With ``pad`` (the pointer kernel), K is also made a multiple of 16, its rows
    zero-padded (zeros add nothing to a dot): a K that is not (8_Matmul_with_irregular_shapes_: 2949) leaves the
    kernel's K mask in runs of one element and every load 4 bytes wide (15.42 -> 4.37 ms padded)."""
    k = a.shape[-1]
    k16 = -(-k // 16) * 16
    k_out = k16 if pad else k

    def ready(t):  # t is (rows, K) or (batch, rows, K); a copy is always a new tensor, never the input
        if k_out == k and t.stride(-1) == 1:
            return {ident}_aligned(t)
        lead, rows = (t.shape[0] if t.dim() == 3 else 1), t.shape[-2]
        out = torch.empty((*t.shape[:-1], k16), dtype=t.dtype, device=t.device)
        if lead > 65535:  # past grid axis 2: PyTorch's copy
            out[..., k:].zero_()
            out[..., :k].copy_(t)
            return out[..., :k_out]
        grid = (triton.cdiv(rows, 64), triton.cdiv(k_out, 64), lead)
        {ident}_k_major_copy[grid](t, out, rows, k, k16, t.stride(0) if t.dim() == 3 else 0, t.stride(-2),
                                   t.stride(-1), BLOCK_R=64, BLOCK_K=64, num_warps=4)
        return out[..., :k_out]

    return ready(a), ready(b.mT).mT, k_out'''


class _Writer:
    def __init__(self, graph: ProblemGraph, group: Group, config: GemmConfig, ident: str) -> None:
        self.graph, self.group, self.config, self.ident = graph, group, config, ident
        self.plan: GemmPlan = group.detail["gemm"]
        taken = set(group.inputs)
        names = ("mat_a", "mat_b", "M", "N", "K", "batch", "start", "grid", "ws", "n_split", "k_split")
        self.local = {n: self._fresh(n, taken) for n in names}
        anchor_shape = [dim_size(d) for d in self.plan.levels[self.plan.anchor]]
        self.operands = list(self.plan.operand_levels)
        self.modes = {v: _mode(graph, v, [dim_size(d) for d in self.plan.operand_levels[v]], anchor_shape)
                      for v in self.operands}
        self.outputs = list(group.outputs)

    @staticmethod
    def _fresh(name: str, taken: set[str]) -> str:
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    # -- symbolic sizes as Python expressions of the launcher's inputs
    def dim(self, dim: Dim) -> str:
        parts: list[str] = []
        for f in dim:
            if isinstance(f, Atom):
                parts.append(f.expr())
            elif f.key in self.plan.resolved:
                parts.append(self.dim(self.plan.resolved[f.key]))
            else:
                parts.append(str(f.size))  # an expand whose size nothing else carries: the graph's constant
        return " * ".join(parts) or "1"

    def shape(self, dims: Sequence[Dim]) -> str:
        items = [self.dim(d) for d in dims]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def operand(self, op: Operand) -> str:
        text = op.source
        for step in op.steps:
            if step.kind == "permute":
                text += f".permute({', '.join(map(str, step.perm))})"
            else:
                text += f".{step.kind}{self.shape(step.dims)}"
        return text

    def render(self) -> Rendered:
        plan, cfg = self.plan, self.config
        kernel = f"{self.ident}_kernel"
        variant = cfg.variant or "pointer"
        if variant not in ("pointer", "tma"):  # the CUDA variants are cuda.py's
            raise ValueError(f"gemm config variant={variant!r}: use 'pointer' (cp.async loads, a program a tile) "
                             "or 'tma' (tensor-descriptor loads, a persistent grid)")
        tma = variant == "tma"
        split = (cfg.split_k or 1) > 1
        if split and (tma or plan.batched):
            raise ValueError("gemm config split_k: only the pointer variant of an unbatched GEMM splits K")
        lines = ["@triton.jit", f"def {kernel}("]
        lines += _wrap(self.split_params() if split else self.kernel_params(tma), "    ")
        lines += ["    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,",
                  "    GROUP_M: tl.constexpr,",
                  *(["    A_T: tl.constexpr, B_T: tl.constexpr,"] if tma else []),
                  "):"]
        if tma:
            lines += [f"    {line}" for line in self.tma_loop()]
            lines += [f"        {line}" for line in self.epilogue()]
        elif split:
            lines += [f"    {line}" for line in (*self.main_loop(split=True), *self.partial_store())]
            lines += ["", "", *self.split_epilogue_kernel()]
        else:
            lines += [f"    {line}" for line in (*self.main_loop(), *self.epilogue())]
        lines += ["", "", *_ALIGNED.format(ident=self.ident).splitlines(), "", ""]
        if cfg.kmajor:
            lines += [*_K_MAJOR.format(ident=self.ident).splitlines(), "", ""]
        if tma:
            lines += [*TMA_READY_SOURCE.format(ident=self.ident).splitlines(), "", "",
                      *SM_COUNT_SOURCE.format(ident=self.ident).splitlines(), "", ""]
        lines += self.launcher(kernel, tma, split)
        dot = cfg.precision if plan.a.dtype == torch.float32 else str(plan.a.dtype).removeprefix("torch.")
        notes = (f"{plan.anchor}: {cfg.BLOCK_M}x{cfg.BLOCK_N}x{cfg.BLOCK_K} tiles, {dot} dot"
                 + (", operands K-major" if cfg.kmajor else "")
                 + (", TMA loads, persistent grid" if tma else "")
                 + (f", K split in up to {cfg.split_k} shares" if split else ""),)
        return Rendered(source="\n".join(lines), launcher=self.ident, notes=notes)

    def kernel_params(self, tma: bool = False) -> list[str]:
        plan = self.plan
        params = ["a_desc", "b_desc"] if tma else ["a_ptr", "b_ptr"]
        params += [*(f"in_{v}" for v in self.operands), *(f"out_{o}" for o in self.outputs)]
        params += ["M", "N", "K"]
        if tma:
            params += ["batch", "programs"] if plan.batched else ["programs"]
        elif plan.batched:
            params += ["batch0", "stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk", "stride_bn"]
        else:
            params += ["stride_am", "stride_ak", "stride_bk", "stride_bn"]
        return params + self.operand_stride_params()

    def operand_stride_params(self) -> list[str]:
        params: list[str] = []
        for v in self.operands:
            mode = self.modes[v][0]
            if mode == "scalar":
                continue
            if self.plan.batched:
                params.append(f"stride_{v}_b")
            params += {"row": [f"stride_{v}_n"], "col": [f"stride_{v}_m"],
                       "tile": [f"stride_{v}_m", f"stride_{v}_n"]}[mode]
        return params

    def split_params(self) -> list[str]:
        """Split K's first kernel: a share of K a program (grid axis 1), its fp32 partial tile to a workspace."""
        return ["a_ptr", "b_ptr", "ws_ptr", "M", "N", "K", "K_SPLIT", "stride_am", "stride_ak", "stride_bk",
                "stride_bn"]

    def partial_store(self) -> list[str]:
        return ["# This share's partial tile, in fp32, to its plane of the workspace: the second kernel sums the",
                "# planes in a fixed order (deterministic) and applies the epilogue.",
                "mask = mask_m[:, None] & mask_n[None, :]",
                "ws_ptr += tl.program_id(1).to(tl.int64) * M * N  # int64: the share index is a tensor",
                "tl.store(ws_ptr + (row0 + rm[:, None]) * N + (col0 + rn[None, :]), acc, mask=mask)"]

    def split_epilogue_kernel(self) -> list[str]:
        """Split K's second kernel: a tile a program, the shares' partial tiles summed, then the epilogue."""
        # plane = M * N from the launcher: an int argument of 1 (M or N) arrives as a constexpr, without .to()
        params = ["ws_ptr", *(f"in_{v}" for v in self.operands), *(f"out_{o}" for o in self.outputs), "M", "N",
                  "plane", "n_split", *self.operand_stride_params()]
        body = [
            "pid = tl.program_id(0)",
            "num_pid_n = tl.cdiv(N, BLOCK_N)",
            "row0 = (pid // num_pid_n).to(tl.int64) * BLOCK_M",
            "col0 = (pid % num_pid_n).to(tl.int64) * BLOCK_N",
            "rm = tl.arange(0, BLOCK_M)",
            "rn = tl.arange(0, BLOCK_N)",
            "mask_m = rm < M - row0",
            "mask_n = rn < N - col0",
            "ws_ptrs = ws_ptr + (row0 + rm[:, None]) * N + (col0 + rn[None, :])",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "for s in range(0, n_split):",
            "    acc += tl.load(ws_ptrs, mask=mask_m[:, None] & mask_n[None, :], other=0.0)",
            "    ws_ptrs += plane",
            *self.epilogue(),
        ]
        return ["@triton.jit", f"def {self.ident}_splitk_epilogue(", *_wrap(params, "    "),
                "    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,", "):",
                *(f"    {line}" for line in body)]

    def main_loop(self, split: bool = False) -> list[str]:
        plan = self.plan
        body = [
            "# Grouped program order: GROUP_M row blocks in a row walk the same column blocks of B, so each",
            "# B tile is fetched from DRAM once per group and served from L2 to the rest.",
            "pid = tl.program_id(0)",
            "num_pid_m = tl.cdiv(M, BLOCK_M)",
            "num_pid_n = tl.cdiv(N, BLOCK_N)",
            "num_pid_in_group = GROUP_M * num_pid_n",
            "first_pid_m = (pid // num_pid_in_group) * GROUP_M",
            "group_size_m = min(num_pid_m - first_pid_m, GROUP_M)",
            "pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m",
            "pid_n = (pid % num_pid_in_group) // group_size_m",
            "# Move the base pointers to this tile's origin in 64-bit arithmetic (a matrix may exceed 2**31",
            "# elements); offsets inside the tile stay 32-bit.",
            "row0 = pid_m.to(tl.int64) * BLOCK_M",
            "col0 = pid_n.to(tl.int64) * BLOCK_N",
        ]
        if plan.batched:
            body += ["bid = tl.program_id(1).to(tl.int64) + batch0",
                     "a_ptr += bid * stride_ab + row0 * stride_am",
                     "b_ptr += bid * stride_bb + col0 * stride_bn"]
        else:
            body += ["a_ptr += row0 * stride_am", "b_ptr += col0 * stride_bn"]
        extent = "K"
        if split:
            extent = "k_len"
            body += ["# This program's share of K: K_SPLIT (a multiple of BLOCK_K) from k_lo.",
                     "k_lo = tl.program_id(1).to(tl.int64) * K_SPLIT",
                     "a_ptr += k_lo * stride_ak",
                     "b_ptr += k_lo * stride_bk",
                     "k_len = tl.minimum(K - k_lo, K_SPLIT).to(tl.int32)"]
        cast_a = "" if plan.a.load_dtype == plan.a.dtype else f".to({expr.TL_DTYPE[plan.a.dtype]})"
        cast_b = "" if plan.b.load_dtype == plan.b.dtype else f".to({expr.TL_DTYPE[plan.b.dtype]})"
        precision = f', input_precision="{self.config.precision}"' if plan.a.dtype == torch.float32 else ""
        b_tile = self.config.b_tile or "kn"
        if b_tile not in ("kn", "nk"):
            raise ValueError(f"gemm config b_tile={b_tile!r}: use 'kn' (B's tile K x N) or 'nk' (N x K, transposed)")
        if b_tile == "nk":
            # B's tile loaded as [BLOCK_N, BLOCK_K] and transposed for the dot: the same values, another load
            # layout (a lead for a K-major B, nn.Linear's weight; timed with scripts/family_sweep.py --grid).
            b_loop = ["b_ptrs = b_ptr + rn[:, None] * stride_bn + rk[None, :] * stride_bk",
                      f"    b = tl.load(b_ptrs, mask=mask_n[:, None] & (rk[None, :] < {extent} - k), other=0.0){cast_b}",
                      f"    acc = tl.dot(a, tl.trans(b), acc=acc{precision})"]
        else:
            b_loop = ["b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn",
                      f"    b = tl.load(b_ptrs, mask=(rk[:, None] < {extent} - k) & mask_n[None, :], other=0.0){cast_b}",
                      f"    acc = tl.dot(a, b, acc=acc{precision})"]
        return body + [
            "rm = tl.arange(0, BLOCK_M)",
            "rn = tl.arange(0, BLOCK_N)",
            "rk = tl.arange(0, BLOCK_K)",
            "mask_m = rm < M - pid_m * BLOCK_M",
            "mask_n = rn < N - pid_n * BLOCK_N",
            "a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak",
            *b_loop[:1],
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            f"for k in range(0, {extent}, BLOCK_K):",
            f"    a = tl.load(a_ptrs, mask=mask_m[:, None] & (rk[None, :] < {extent} - k), other=0.0){cast_a}",
            *b_loop[1:],
            "    a_ptrs += BLOCK_K * stride_ak",
            "    b_ptrs += BLOCK_K * stride_bk",
        ]

    def tma_loop(self) -> list[str]:
        """A persistent grid of ``programs`` programs (one an SM at most) walking the output tiles (grouped order),
        each K step's A and B tiles fetched by the tensor-memory accelerator from host-built descriptors
        (zero-filled past M, N and K: no masks in the loop). A_T / B_T: the descriptor is over the operand's
        transpose (its unit stride is along M, resp. K: nn.Linear's weight), the tile transposed back for the dot,
        which wgmma reads either way."""
        plan = self.plan
        cast_a = "" if plan.a.load_dtype == plan.a.dtype else f".to({expr.TL_DTYPE[plan.a.dtype]})"
        cast_b = "" if plan.b.load_dtype == plan.b.dtype else f".to({expr.TL_DTYPE[plan.b.dtype]})"
        precision = f', input_precision="{self.config.precision}"' if plan.a.dtype == torch.float32 else ""
        lead, shape_a, shape_b, shape_at, shape_bt = "", "", "", "", ""
        if plan.batched:  # rank-3 descriptors: a [1, rows, cols] box of the batch's matrix
            lead = "bid32, "
            shape_a, shape_at = ".reshape(BLOCK_M, BLOCK_K)", ".reshape(BLOCK_K, BLOCK_M)"
            shape_b, shape_bt = ".reshape(BLOCK_K, BLOCK_N)", ".reshape(BLOCK_N, BLOCK_K)"
        ws = ", warp_specialize=True" if self.config.warp_specialize else ""
        flatten = ", flatten=True" if self.config.flatten is not False else ""
        body = [
            "num_pid_m = tl.cdiv(M, BLOCK_M)",
            "num_pid_n = tl.cdiv(N, BLOCK_N)",
            "tiles = num_pid_m * num_pid_n",
            "num_pid_in_group = GROUP_M * num_pid_n",
            "k_tiles = tl.cdiv(K, BLOCK_K)",
            "rm = tl.arange(0, BLOCK_M)",
            "rn = tl.arange(0, BLOCK_N)",
            f"for tile in tl.range(tl.program_id(0), {'batch * tiles' if plan.batched else 'tiles'}, programs"
            f"{flatten}{ws}):",
        ]
        inner = []
        if plan.batched:
            inner += ["bid32 = tile // tiles", "bid = bid32.to(tl.int64)", "t = tile % tiles"]
        else:
            inner += ["t = tile"]
        inner += [
            "first_pid_m = (t // num_pid_in_group) * GROUP_M",
            "group_size_m = min(num_pid_m - first_pid_m, GROUP_M)",
            "pid_m = first_pid_m + (t % num_pid_in_group) % group_size_m",
            "pid_n = (t % num_pid_in_group) // group_size_m",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "for kt in range(k_tiles):",
            "    k = kt * BLOCK_K",
            "    if A_T:",
            f"        a = tl.trans(a_desc.load([{lead}k, pid_m * BLOCK_M]){shape_at}){cast_a}",
            "    else:",
            f"        a = a_desc.load([{lead}pid_m * BLOCK_M, k]){shape_a}{cast_a}",
            "    if B_T:",
            f"        b = tl.trans(b_desc.load([{lead}pid_n * BLOCK_N, k]){shape_bt}){cast_b}",
            "    else:",
            f"        b = b_desc.load([{lead}k, pid_n * BLOCK_N]){shape_b}{cast_b}",
            f"    acc = tl.dot(a, b, acc=acc{precision})",
            "# The tile's origin in 64-bit arithmetic for the epilogue's pointers.",
            "row0 = pid_m.to(tl.int64) * BLOCK_M",
            "col0 = pid_n.to(tl.int64) * BLOCK_N",
            "mask_m = rm < M - row0",
            "mask_n = rn < N - col0",
        ]
        return body + [f"    {line}" for line in inner]

    def epilogue(self) -> list[str]:
        graph, plan = self.graph, self.plan
        ops = [graph.node(n).op for n in (*plan.producers, *plan.epilogue)]
        ops = [op for op in ops if op not in GLUE_RESHAPES]
        body = ["# Epilogue on the fp32 accumulator tile" + (f" ({', '.join(ops)})" if ops else "")
                + "; one rounding, at the store.",
                "mask = mask_m[:, None] & mask_n[None, :]"]
        env: dict[str, expr.Value] = {}
        for v in self.operands:
            mode = self.modes[v][0]
            off = f"bid * stride_{v}_b + " if plan.batched else ""
            if mode == "scalar":
                load = f"tl.load(in_{v})"
            elif mode == "row":  # one row broadcast down the tile
                load = f"tl.load(in_{v} + {off}(col0 + rn) * stride_{v}_n, mask=mask_n, other=0)[None, :]"
            elif mode == "col":  # one column broadcast across the tile
                load = f"tl.load(in_{v} + {off}(row0 + rm) * stride_{v}_m, mask=mask_m, other=0)[:, None]"
            else:
                body.append(f"ptrs_{v} = in_{v} + {off}(row0 + rm[:, None]) * stride_{v}_m + "
                            f"(col0 + rn[None, :]) * stride_{v}_n")
                load = f"tl.load(ptrs_{v}, mask=mask, other=0)"
            line, env[v] = load_line(v, load, graph.info(v).dtype)
            body.append(line)
        for v, (row, col, const) in plan.indices.items():
            body.append(self.index_line(v, row, col, const))
            env[v] = expr.Value(f"x_{v}", expr.compute_dtype(graph.info(v).dtype))
        emitter = expr.PointwiseEmitter()
        emitter.emit_all((graph.node(n) for n in (*plan.constants, *plan.producers)), env)
        body += emitter.lines
        emitter.lines = []
        result = "acc" if plan.alpha == 1 else f"acc * {plan.alpha!r}"
        if plan.bias is not None:
            result += f" + x_{plan.bias}" if plan.beta == 1 else f" + x_{plan.bias} * {plan.beta!r}"
        if result != "acc":
            body.append(f"v_{plan.anchor} = {result}")
            result = f"v_{plan.anchor}"
        env[plan.anchor] = expr.Value(result, torch.float32)
        for name in plan.epilogue:
            node = graph.node(name)
            if node.op in GLUE_RESHAPES:
                env[name] = env[node.args[0].name]  # a view: the same tile under another shape
            else:
                env[name] = emitter.emit(node, env)
        body += emitter.lines
        batch_offset = "bid * M * N + " if plan.batched else ""
        body.append(f"out_offsets = {batch_offset}(row0 + rm[:, None]) * N + (col0 + rn[None, :])")
        for o in self.outputs:
            value = f"{env[o].expr}.to({expr.TL_DTYPE[graph.info(o).dtype]})"
            body.append(f"tl.store(out_{o} + out_offsets, {value}, mask=mask)")
        return body

    def index_line(self, v: str, row: int, col: int, const: float) -> str:
        """``x_<v> = ...``: an index operand from the tile's coordinates (no tensor read)."""
        dtype = self.graph.info(v).dtype
        cast = expr.TL_DTYPE[expr.compute_dtype(dtype)]
        terms = [t for t in (_term(row, "(row0 + rm)", cast, "[:, None]"), _term(col, "(col0 + rn)", cast, "[None, :]"))
                 if t]
        number = int(const) if not dtype.is_floating_point else float(const)
        if number:
            terms.append(repr(number))
        return f"x_{v} = {' + '.join(terms)}  # {self.graph.node(v).op}: an index value, computed, not read"

    def operand_views(self, tile_shape: str) -> tuple[list[str], list[str]]:
        """Launcher lines giving each epilogue operand its view at the tile's shape (expanded, reshaped, checked
        where a traced size of 1 hid a broadcast), and the stride arguments the kernel reads them through."""
        plan, (m, n) = self.plan, (self.local["M"], self.local["N"])
        anchor_level = plan.levels[plan.anchor]
        lines: list[str] = []
        stride_args: list[str] = []
        for v in self.operands:
            mode, assumes_row, assumes_col = self.modes[v]
            if mode == "scalar":
                continue
            level = plan.operand_levels[v]
            local = f"{v}_tile"
            if level == anchor_level:
                lines.append(f"    {local} = {v}.expand{tile_shape}")
            else:
                lines.append(f"    {local} = {v}.expand{self.shape(level)}.reshape{tile_shape}")
            if assumes_row:
                lines.append(f'    assert {m} == 1 or {local}.stride(-2) == 0, "{v}: generated as a row"')
            if assumes_col:
                lines.append(f'    assert {n} == 1 or {local}.stride(-1) == 0, "{v}: generated as a column"')
            if plan.batched:
                stride_args.append(f"{local}.stride(0)")
            stride_args += {"row": [f"{local}.stride(-1)"], "col": [f"{local}.stride(-2)"],
                            "tile": [f"{local}.stride(-2)", f"{local}.stride(-1)"]}[mode]
        return lines, stride_args

    def launcher(self, kernel: str, tma: bool = False, split: bool = False) -> list[str]:
        graph, plan, cfg, L = self.graph, self.plan, self.config, self.local
        a, b, m, n, k, batch = L["mat_a"], L["mat_b"], L["M"], L["N"], L["K"], L["batch"]
        lines = [
            f"def {self.ident}({', '.join(self.group.inputs)}):",
            f'    """{", ".join(graph.node(x).op for x in self.group.nodes)}.',
            "",
            "    One tiled tl.dot kernel, fp32 accumulation, the epilogue computed on the tile. Operands",
            "    are read through their strides (a transposed weight is not copied); sizes come from the",
            '    tensors, so any shape works."""',
            f"    {a} = {self.operand(plan.a)}",
            f"    {b} = {self.operand(plan.b)}",
        ]
        if plan.batched:
            macs = f"{batch} * {m} * {n} * {k}"
            lines += [f"    {batch}, {m}, {k} = {a}.shape",
                      f"    {n} = {b}.shape[2]",
                      f'    assert {b}.shape[:2] == ({batch}, {k}), "bmm: the operand shapes do not match"']
        else:
            macs = f"{m} * {n} * {k}"
            lines += [f"    {m}, {k} = {a}.shape",
                      f"    {n} = {b}.shape[1]",
                      f'    assert {b}.shape[0] == {k}, "mm: the inner dimensions differ"']
        if cfg.kmajor:
            # 3xTF32 on wgmma reads both tiles K-major (TF32 operands have no transposed form): an operand laid out
            # otherwise is copied K-major once, in this forward's time (gemm/family.py has the figures).
            # Descriptors fill a tile's out-of-bounds K with zeros: the TMA kernel has no K mask to keep in runs.
            lines.append(f"    {a}, {b}, {k} = {self.ident}_k_major({a}, {b}, pad={not tma})")
        if tma:  # descriptors need 16-byte rows: a layout that has none is copied, whatever the size
            lines += [f"    {a}, a_t = {self.ident}_tma_ready({a}, True)",
                      f"    {b}, b_t = {self.ident}_tma_ready({b}, True)"]
        elif not cfg.kmajor:
            lines.append(f"    if {macs} >= {_PAD_MIN_MACS}:  # big enough that copying an unaligned operand pays")
            if cfg.b_copy:
                # B copied N-major where it is not (nn.Linear's weight, read as w.t()): the FMA dot reads a
                # K-major B tile far slower (linear_relu fp32 4096^3 6.21 ms against matmul_fp32's 3.17 at the
                # same tile, run 33, H200, 2026-12-02; loading it N x K and transposing in the kernel changed
                # nothing); the copy is one pass over B.
                lines += [f"        if {b}.stride(-1) != 1:",
                          f"            {b} = {b}.contiguous()"]
            lines.append(f"        {a}, {b} = {self.ident}_aligned({a}), {self.ident}_aligned({b})")
        tile_shape = f"({batch}, {m}, {n})" if plan.batched else f"({m}, {n})"
        views, stride_args = self.operand_views(tile_shape)
        lines += views
        for o in self.outputs:
            lines.append(f"    out_{o} = torch.empty({self.shape(plan.levels[o])}, "
                         f"dtype={graph.info(o).dtype}, device={plan.a.source}.device)")
        operand_args = [*(v if self.modes[v][0] == "scalar" else f"{v}_tile" for v in self.operands),
                        *(f"out_{o}" for o in self.outputs)]
        consts = (f"BLOCK_M={cfg.BLOCK_M}, BLOCK_N={cfg.BLOCK_N}, BLOCK_K={cfg.BLOCK_K}, "
                  f"GROUP_M={cfg.GROUP_M}, num_warps={cfg.num_warps}, num_stages={cfg.num_stages}")
        tiles = f"triton.cdiv({m}, {cfg.BLOCK_M}) * triton.cdiv({n}, {cfg.BLOCK_N})"
        if tma:
            lines += self.tma_launch(kernel, operand_args, stride_args, consts, tiles)
            lines.append(f"    return ({', '.join(f'out_{o}' for o in self.outputs)},)")
            return lines
        if split:
            lines += self.split_launch(kernel, operand_args, stride_args, consts, tiles)
            lines.append(f"    return ({', '.join(f'out_{o}' for o in self.outputs)},)")
            return lines
        args = [a, b, *operand_args, m, n, k]
        if plan.batched:
            args.append(L["start"])
        args += [f"*{a}.stride()", f"*{b}.stride()", *stride_args]
        if plan.batched:
            start, grid = L["start"], L["grid"]
            lines += [f"    for {start} in range(0, {batch}, {_GRID_Y_MAX}):  # at most 65535 on grid axis 1",
                      f"        {grid} = ({tiles}, min({batch} - {start}, {_GRID_Y_MAX}))",
                      f"        {kernel}[{grid}](",
                      *_wrap(args, "            "),
                      f"            {consts},",
                      "        )"]
        else:
            lines += [f"    {L['grid']} = ({tiles},)",
                      f"    {kernel}[{L['grid']}](",
                      *_wrap(args, "        "),
                      f"        {consts},",
                      "    )"]
        lines.append(f"    return ({', '.join(f'out_{o}' for o in self.outputs)},)")
        return lines

    def split_launch(self, kernel: str, operand_args: list[str], stride_args: list[str], consts: str,
                     tiles: str) -> list[str]:
        """Split K: up to ``split_k`` shares of K (each at least 4 K steps, so a small K is not split; the fp32
        workspace at most 256 MiB, so a larger run-time shape splits less), their partial tiles in the workspace,
        then the summing epilogue kernel (a program a tile)."""
        cfg, L = self.config, self.local
        a, b, m, n, k = L["mat_a"], L["mat_b"], L["M"], L["N"], L["K"]
        ws, n_split, k_split = L["ws"], L["n_split"], L["k_split"]
        bk = cfg.BLOCK_K
        return [
            f"    {n_split} = max(1, min({cfg.split_k}, triton.cdiv({k}, 4 * {bk}), (64 << 20) // max(1, {m} * {n})))",
            f"    {k_split} = max(1, triton.cdiv(triton.cdiv({k}, {n_split}), {bk})) * {bk}",
            f"    {n_split} = max(1, triton.cdiv({k}, {k_split}))",
            f"    {ws} = torch.empty(({n_split}, {m}, {n}), dtype=torch.float32, device={a}.device)",
            f"    {kernel}[({tiles}, {n_split})](",
            *_wrap([a, b, ws, m, n, k, k_split, f"*{a}.stride()", f"*{b}.stride()"], "        "),
            f"        {consts},",
            "    )",
            f"    {self.ident}_splitk_epilogue[({tiles},)](",
            *_wrap([ws, *operand_args, m, n, f"{m} * {n}", n_split, *stride_args], "        "),
            f"        BLOCK_M={cfg.BLOCK_M}, BLOCK_N={cfg.BLOCK_N}, num_warps={cfg.num_warps},",
            "    )",
        ]

    def tma_launch(self, kernel: str, operand_args: list[str], stride_args: list[str], consts: str,
                   tiles: str) -> list[str]:
        plan, cfg, L = self.plan, self.config, self.local
        a, b, m, n, k, batch = L["mat_a"], L["mat_b"], L["M"], L["N"], L["K"], L["batch"]
        bm, bn, bk = cfg.BLOCK_M, cfg.BLOCK_N, cfg.BLOCK_K
        one = "1, " if plan.batched else ""
        count = f"{batch} * {tiles}" if plan.batched else tiles
        lines = [
            "    from triton.tools.tensor_descriptor import TensorDescriptor",
            f"    a_box = [{one}{bk}, {bm}] if a_t else [{one}{bm}, {bk}]",
            f"    b_box = [{one}{bn}, {bk}] if b_t else [{one}{bk}, {bn}]",
            f"    a_desc = TensorDescriptor.from_tensor({a}.mT if a_t else {a}, a_box)",
            f"    b_desc = TensorDescriptor.from_tensor({b}.mT if b_t else {b}, b_box)",
            f"    programs = max(1, min({count}, {self.ident}_sm_count({a}.device, 4)))",
            f"    {kernel}[(programs,)](",
            *_wrap(["a_desc", "b_desc", *operand_args, m, n, k, *([batch] if plan.batched else []), "programs",
                    *stride_args], "        "),
            f"        {consts},",
            "        A_T=a_t, B_T=b_t,",
            "    )",
        ]
        return lines


def _term(coefficient: int, index: str, cast: str, broadcast: str) -> str:
    if not coefficient:
        return ""
    scaled = f"{index}.to({cast})" if coefficient == 1 else f"{coefficient} * {index}.to({cast})"
    return f"({scaled}){broadcast}"


def _wrap(items: Sequence[str], indent: str, width: int = 110) -> list[str]:
    """``items`` as comma-terminated lines of at most ``width`` characters."""
    lines: list[str] = []
    line = indent
    for item in items:
        piece = f"{item}, "
        if len(line) + len(piece) > width and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines
