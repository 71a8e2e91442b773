"""The source of a batch-statistics normalisation group: the partial-statistics, finalise and apply kernels, and
the launcher that sizes everything from the input at run time."""

from __future__ import annotations

import torch

from kernelwright.generate import expr
from kernelwright.generate.families import base
from kernelwright.generate.families.base import Group, Rendered
from kernelwright.generate.families.batchnorm.config import BatchNormConfig
from kernelwright.generate.families.batchnorm.matching import (
    OUT,
    RUNNING_MEAN,
    RUNNING_VAR,
    SAVE_MEAN,
    SAVE_RSTD,
    BatchNorm,
)
from kernelwright.generate.graph import ProblemGraph
from kernelwright.generate.operators import CONSTANTS

# Programs to aim for in the statistics pass (channels x shares): enough to fill an H100/H200 twice over.
TARGET_PROGRAMS = 264
MAX_SHARES = 64
CHANNEL_BLOCK = 128  # channels a finalise program handles


def write(graph: ProblemGraph, group: Group, config: BatchNormConfig, ident: str) -> Rendered:
    return _Writer(graph, group, config, ident).render()


def _merge(n_a: str, mean_a: str, m2_a: str, n_b: str, mean_b: str, m2_b: str) -> list[str]:
    """Lines merging (n_b, mean_b, m2_b) into (n_a, mean_a, m2_a): Chan et al.'s pairwise update, safe when either
    count is zero."""
    return [
        f"n_ab = {n_a} + {n_b}",
        f"delta = {mean_b} - {mean_a}",
        f"weight_b = tl.where(n_ab > 0, {n_b} / tl.maximum(n_ab, 1.0), 0.0)",
        f"{mean_a} = {mean_a} + delta * weight_b",
        f"{m2_a} = {m2_a} + {m2_b} + delta * delta * {n_a} * weight_b",
        f"{n_a} = n_ab",
    ]


class _Writer:
    def __init__(self, graph: ProblemGraph, group: Group, config: BatchNormConfig, ident: str) -> None:
        self.graph, self.group, self.config, self.ident = graph, group, config, ident
        self.bn: BatchNorm = group.detail["bn"]
        self.shape: tuple[int, ...] = tuple(group.detail["shape"])
        self.epilogue: tuple[str, ...] = tuple(group.detail["epilogue"])
        self.operands = base.outside_reads(graph, group, self.epilogue)
        self.modes = {v: base.operand_mode(graph.info(v), self.shape) for v in self.operands}
        self.strided = [v for v in self.operands if self.modes[v] == "strided"]
        stats = {SAVE_MEAN, SAVE_RSTD, RUNNING_MEAN, RUNNING_VAR}
        self.stat_outputs = {i: n for i, n in self.bn.items if i in stats and n in group.outputs}
        self.full_outputs = [o for o in group.outputs if o not in self.stat_outputs.values()]
        self.params = [p for p in (self.bn.weight, self.bn.bias) if p is not None]

    def _dtype(self, value: str) -> str:
        return expr.TL_DTYPE[self.graph.info(value).dtype]

    # -- kernel 1: partial statistics --------------------------------------------------------------------------
    def _stats_kernel(self) -> list[str]:
        x = self.bn.x
        return [
            "@triton.jit",
            f"def {self.ident}_stats(in_{x}, part, n_channels, spatial, count, chunk, shares, BLOCK_C: tl.constexpr, "
            "LANES: tl.constexpr, IDX64: tl.constexpr):",
            '    """Partial statistics: program (channels, share) reduces its share of BLOCK_C channels\' N x spatial '
            'elements, LANES at a time (count, mean, sum of squared deviations; Chan\'s merge in fp32). Several '
            'channels a program where a channel has few elements."""',
            "    channel = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)",
            "    c_ok = channel < n_channels",
            "    share = tl.program_id(1)",
            "    lanes = tl.arange(0, LANES)",
            "    start = share * chunk",
            "    if IDX64:",
            "        start = start.to(tl.int64)",
            "    stop = tl.minimum(start + chunk, count)",
            "    n_acc = tl.zeros([BLOCK_C], dtype=tl.float32)",
            "    mean_acc = tl.zeros([BLOCK_C], dtype=tl.float32)",
            "    m2_acc = tl.zeros([BLOCK_C], dtype=tl.float32)",
            "    for first in range(start, stop, LANES):",
            "        r = first + lanes  # (image, position) flattened over a channel's elements",
            "        mask = c_ok[:, None] & (r < stop)[None, :]",
            "        image = r // spatial",
            f"        v = tl.load(in_{x} + (image[None, :] * n_channels + channel[:, None]) * spatial + "
            "(r - image * spatial)[None, :], mask=mask, other=0).to(tl.float32)",
            "        n_blk = tl.sum(mask.to(tl.float32), axis=1)",
            "        mean_blk = tl.sum(v, axis=1) / tl.maximum(n_blk, 1.0)",
            "        dev = tl.where(mask, v - mean_blk[:, None], 0.0)",
            "        m2_blk = tl.sum(dev * dev, axis=1)",
            *(f"        {line}" for line in _merge("n_acc", "mean_acc", "m2_acc", "n_blk", "mean_blk", "m2_blk")),
            "    slot = channel * shares + share",
            "    tl.store(part + slot, n_acc, mask=c_ok)",
            "    tl.store(part + n_channels * shares + slot, mean_acc, mask=c_ok)",
            "    tl.store(part + 2 * n_channels * shares + slot, m2_acc, mask=c_ok)",
        ]

    # -- kernel 2: finalise ------------------------------------------------------------------------------------
    def _finalise_kernel(self) -> list[str]:
        bn = self.bn
        running = [v for v in (bn.running_mean, bn.running_var) if v is not None and self.stat_outputs]
        outs = [f"out_{n}" for n in self.stat_outputs.values()]
        params = ["part", "stats", *(f"in_{v}" for v in running), *outs, "n_channels", "shares", "count",
                  "BLOCK_C: tl.constexpr"]
        lines = [
            "@triton.jit",
            f"def {self.ident}_finalise({', '.join(params)}):",
            '    """Per channel: the shares merged, mean and rstd = 1 / sqrt(biased var + eps) (correctly rounded) '
            'for the apply pass, and the statistics the graph uses."""',
            "    channel = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)",
            "    ok = channel < n_channels",
            "    n_acc = tl.zeros([BLOCK_C], dtype=tl.float32)",
            "    mean_acc = tl.zeros([BLOCK_C], dtype=tl.float32)",
            "    m2_acc = tl.zeros([BLOCK_C], dtype=tl.float32)",
            "    for share in range(shares):",
            "        slot = channel * shares + share",
            "        n_b = tl.load(part + slot, mask=ok, other=0)",
            "        mean_b = tl.load(part + n_channels * shares + slot, mask=ok, other=0)",
            "        m2_b = tl.load(part + 2 * n_channels * shares + slot, mask=ok, other=0)",
            *(f"        {line}" for line in _merge("n_acc", "mean_acc", "m2_acc", "n_b", "mean_b", "m2_b")),
            "    var = m2_acc / tl.maximum(n_acc, 1.0)  # biased: what normalises",
            f"    rstd = tl.div_rn(tl.full([BLOCK_C], 1.0, tl.float32), tl.sqrt_rn(var + {bn.eps!r}))",
            "    tl.store(stats + channel, mean_acc, mask=ok)",
            "    tl.store(stats + n_channels + channel, rstd, mask=ok)",
        ]
        values = {SAVE_MEAN: "mean_acc", SAVE_RSTD: "rstd"}
        m = bn.momentum
        if RUNNING_MEAN in self.stat_outputs:
            lines.append(f"    old_mean = tl.load(in_{bn.running_mean} + channel, mask=ok, other=0).to(tl.float32)")
            values[RUNNING_MEAN] = f"{1.0 - m!r} * old_mean + {m!r} * mean_acc"
        if RUNNING_VAR in self.stat_outputs:
            lines.append(f"    old_var = tl.load(in_{bn.running_var} + channel, mask=ok, other=0).to(tl.float32)")
            lines.append("    unbiased = var * (count / (count - 1.0))  # as PyTorch updates the running variance")
            values[RUNNING_VAR] = f"{1.0 - m!r} * old_var + {m!r} * unbiased"
        for index, name in self.stat_outputs.items():
            lines.append(f"    tl.store(out_{name} + channel, ({values[index]}).to({self._dtype(name)}), mask=ok)")
        return lines

    # -- kernel 3: apply ---------------------------------------------------------------------------------------
    def _apply_kernel(self) -> list[str]:
        bn, rank = self.bn, len(self.shape)
        tensors = list(dict.fromkeys([bn.x, *self.params, *self.operands]))
        params = [f"in_{v}" for v in tensors] + ["stats"] + [f"out_{o}" for o in self.full_outputs]
        params += ["numel", "n_channels", "spatial"]
        if self.strided:
            params += [f"size_{d}" for d in range(rank)]
        for v in self.strided:
            params += [f"stride_{v}_{d}" for d in range(rank)]
        params += ["BLOCK: tl.constexpr", "IDX64: tl.constexpr"]
        body = [
            *base.flat_lanes("numel"),
            "channel = offs // spatial % n_channels",
            "mean = tl.load(stats + channel, mask=mask, other=0)",
            "rstd = tl.load(stats + n_channels + channel, mask=mask, other=0)",
            f"v = tl.load(in_{bn.x} + offs, mask=mask, other=0).to(tl.float32)",
            "y = (v - mean) * rstd",
        ]
        if bn.weight is not None:
            body.append(f"y = y * tl.load(in_{bn.weight} + channel, mask=mask, other=0).to(tl.float32)")
        if bn.bias is not None:
            body.append(f"y = y + tl.load(in_{bn.bias} + channel, mask=mask, other=0).to(tl.float32)")
        if self.strided:
            body.append("rest = offs")
            for d in reversed(range(rank)):
                body += [f"idx_{d} = rest % size_{d}", f"rest = rest // size_{d}"]
        env: dict[str, expr.Value] = {}
        out = bn.item(OUT)
        if out is not None:
            env[out] = expr.Value("y", torch.float32)
        for v in self.operands:
            info, mode = self.graph.info(v), self.modes[v]
            if mode == "scalar":
                load = f"tl.load(in_{v})"
            elif mode == "flat":
                load = f"tl.load(in_{v} + offs, mask=mask, other=0)"
            else:
                offset = " + ".join(f"idx_{d} * stride_{v}_{d}" for d in base.live_dims(info.shape, self.shape)) or "0"
                load = f"tl.load(in_{v} + ({offset}), mask=mask, other=0)"
            line, env[v] = base.load_line(v, load, info.dtype)
            body.append(line)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all((self.graph.node(n) for n in self.group.nodes
                          if n in self.epilogue or self.graph.node(n).op in CONSTANTS), env)
        body += emitter.lines
        for o in self.full_outputs:
            body.append(f"tl.store(out_{o} + offs, {env[o].expr}.to({self._dtype(o)}), mask=mask)")
        return ["@triton.jit", f"def {self.ident}_apply({', '.join(params)}):",
                f'    """{self._describe()}: (x - mean) * rstd * weight + bias and the epilogue, flat over the '
                'input."""', *(f"    {line}" for line in body)]

    def _describe(self) -> str:
        what = "batch norm (batch statistics)" if self.bn.running_mean is None else "batch norm (training)"
        return ", ".join([what, *(self.graph.node(n).op for n in self.epilogue
                                  if self.graph.node(n).op not in CONSTANTS)])

    # -- the launcher ------------------------------------------------------------------------------------------
    def _launcher(self) -> list[str]:
        bn, block, warps = self.bn, self.config.BLOCK, self.config.num_warps
        x = bn.x
        running = [v for v in (bn.running_mean, bn.running_var) if v is not None and self.stat_outputs]
        src = [
            f"def {self.ident}({', '.join(self.group.inputs)}):",
            f'    """{self._describe()}: partial statistics, finalise, apply (three kernels)."""',
            f"    {x} = {x}.contiguous()",
            f"    shape = {x}.shape",
            f"    batch, n_channels = {x}.shape[0], {x}.shape[1]",
            f"    spatial = {x}.numel() // (batch * n_channels)",
            "    count = batch * spatial  # elements a channel's statistics are over",
            f"    shares = max(1, min({MAX_SHARES}, triton.cdiv({TARGET_PROGRAMS}, n_channels), "
            f"triton.cdiv(count, {block})))",
            "    per_share = triton.cdiv(count, shares)",
            f"    # Lanes a channel: {block} (as one channel a program) unless a share has fewer elements; the rest of "
            f"the {block}",
            "    # go to more channels (a 7 x 7 batch-4 feature map: 196 elements a channel, 4 channels a program).",
            f"    lanes = min({block}, max(16, triton.next_power_of_2(per_share)))",
            f"    block_c = min(triton.next_power_of_2(n_channels), max(1, {block} // lanes))",
            "    chunk = triton.cdiv(per_share, lanes) * lanes",
            f"    part = torch.empty((3, n_channels, shares), dtype=torch.float32, device={x}.device)",
            f"    stats = torch.empty((2, n_channels), dtype=torch.float32, device={x}.device)",
            f"    idx64 = {x}.numel() >= 2**31",
            f"    {self.ident}_stats[(triton.cdiv(n_channels, block_c), shares)]({x}, part, n_channels, spatial, "
            f"count, chunk, shares, BLOCK_C=block_c, LANES=lanes, IDX64=idx64, num_warps={warps})",
        ]
        for name in self.stat_outputs.values():
            src.append(f"    out_{name} = torch.empty((n_channels,), dtype={self.graph.info(name).dtype}, "
                       f"device={x}.device)")
        outs = [f"out_{n}" for n in self.stat_outputs.values()]
        src.append(f"    {self.ident}_finalise[(triton.cdiv(n_channels, {CHANNEL_BLOCK}),)](part, stats, "
                   f"{', '.join([*running, *outs, 'n_channels', 'shares', 'count'])}, BLOCK_C={CHANNEL_BLOCK})")
        src += base.operand_layout_lines(self.operands, self.modes)
        for o in self.full_outputs:
            src.append(f"    out_{o} = torch.empty(shape, dtype={self.graph.info(o).dtype}, device={x}.device)")
        tensors = list(dict.fromkeys([x, *self.params, *self.operands]))
        args = [*tensors, "stats", *(f"out_{o}" for o in self.full_outputs), f"{x}.numel()", "n_channels", "spatial"]
        args += base.strided_args(self.strided)
        src.append(f"    {self.ident}_apply[(triton.cdiv({x}.numel(), {block}),)]({', '.join(args)}, BLOCK={block}, "
                   f"IDX64=idx64, num_warps={warps})")
        src.append(f"    return ({', '.join(f'out_{o}' for o in self.group.outputs)},)")
        return src

    def render(self) -> Rendered:
        source = "\n".join([*self._stats_kernel(), "", "", *self._finalise_kernel(), "", "", *self._apply_kernel(),
                            "", "", *self._launcher()])
        return Rendered(source=source, launcher=self.ident, notes=("batch statistics in three passes",))
