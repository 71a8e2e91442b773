"""The attention family: claims written-out or SDPA attention; its configurations are tiles that fit the arch's
shared memory, threads and registers."""

from __future__ import annotations

import math

import torch

from kernelwright.generate.families.attention.config import AttentionConfig
from kernelwright.generate.families.attention.growing import absorb
from kernelwright.generate.families.attention.matching import HALF, SDPA_OPS, explicit, sdpa
from kernelwright.generate.families.attention.writing import write
from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    has_tma,
    make_group,
    next_pow2,
)
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph
from kernelwright.hardware import arch_spec

NAME = "attention"
MAX_HEAD_DIM = 128  # the configs below keep a [BLOCK_M, head_dim] fp32 accumulator in registers


@register
class AttentionFamily:
    name = NAME
    priority = 10  # claim order: claims before gemm: its two bmm nodes are attention's, not two GEMMs

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        if node.name in claimed:
            return None
        if node.op == "bmm":
            core = explicit(graph, node)
        elif node.op in SDPA_OPS:
            core = sdpa(graph, node)
        else:
            return None
        if core is None:
            return None
        q_shape = tuple(graph.info(core.q.source).shape[p] for p in core.q.perm)
        v_shape = tuple(graph.info(core.v.source).shape[p] for p in core.v.perm)
        head_dim, head_dim_v = q_shape[-1], v_shape[-1]
        if max(head_dim, head_dim_v) > MAX_HEAD_DIM or len(core.batch) > 2:
            return None
        qk_dtype = core.q.dtype if core.q.dtype == core.k.dtype else torch.float32
        scale = core.scale
        if math.isnan(scale) or _scale_is_head_dim(scale, head_dim):
            scale_detail: float | None = None
        else:
            scale_detail = scale
        members, out_perm, output = absorb(graph, core, claimed)
        out_dtype = graph.info(output).dtype
        # P is rounded to v's type for the tensor cores, an error of the order of a 16-bit output's rounding;
        # an fp32 output (even of 16-bit inputs) keeps P and v in fp32.
        v_dtype = core.v.dtype if out_dtype in HALF else torch.float32
        if members & claimed:
            return None
        group = make_group(
            graph, NAME, members, anchor=node.name,
            q=core.q.source, k=core.k.source, v=core.v.source,
            q_perm=core.q.perm, k_perm=core.k.perm, v_perm=core.v.perm,
            qk_dtype=qk_dtype, v_dtype=v_dtype,
            batch_rank=len(core.batch), causal=core.causal, scale=scale_detail,
            zero_empty_rows=core.zero_empty_rows, core_dtype=core.core_dtype, out_dtype=out_dtype,
            out_perm=out_perm, head_dim=head_dim, head_dim_v=head_dim_v,
            seq_q=q_shape[-2], seq_k=graph.info(core.k.source).shape[core.k.perm[-2]],
            form="sdpa" if node.op in SDPA_OPS else "explicit",
        )
        if group.outputs != (output,):
            return None  # an intermediate (the scores, the probabilities) is needed elsewhere
        for name in (core.q.source, core.k.source, core.v.source):
            if name not in group.inputs:
                return None
        return group

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        detail = group.detail
        fp32 = torch.float32 in (detail["qk_dtype"], detail["v_dtype"])
        block_d = _block_dim(detail["head_dim"])
        block_dv = _block_dim(detail["head_dim_v"])
        if fp32:
            # No tensor cores for ieee fp32: CUDA-core FMAs, small tiles keep the [BLOCK_M, BLOCK_N] scores and the
            # accumulator in registers. Leads, not measured.
            tiles = [(64, 32, 4, 2), (32, 32, 4, 2), (64, 64, 4, 2), (128, 32, 8, 2), (32, 64, 4, 2)]
            precisions = ["ieee"] * len(tiles)
            if policy.allow_tf32:
                tiles = [(128, 64, 4, 3), (64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 8, 2)] + tiles
                precisions = ["tf32"] * 4 + precisions
            elem = 4
        else:
            if max(block_d, block_dv) <= 64:
                # Triton's FA tutorial on Hopper: 128x64 tiles, 4 warps (one warpgroup), 3 stages for d <= 64.
                tiles = [(128, 64, 4, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 8, 3), (128, 32, 4, 4),
                         (64, 32, 4, 4)]
            else:
                # d = 128: a 128x128 fp32 accumulator needs two warpgroups to stay in registers.
                tiles = [(128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (128, 32, 8, 4), (64, 32, 4, 4)]
            if detail["seq_q"] <= 64:
                tiles.sort(key=lambda t: t[0] != 64)  # short sequences: half of a 128-row tile would idle
            precisions = ["native"] * len(tiles)
            elem = 2
        spec = arch_spec(arch)
        smem_limit = spec.shared_memory_per_block_optin_bytes or spec.shared_memory_per_block_bytes
        max_threads = spec.max_threads_per_block
        configs: list[AttentionConfig] = []
        for (block_m, block_n, warps, stages), precision in zip(tiles, precisions):
            # Shared memory: q once, k and v per pipeline stage.
            smem = elem * (block_m * block_d + stages * block_n * (block_d + block_dv))
            # fp32 accumulator and scores per thread; past ~128 registers the tile spills.
            regs = (block_m * block_dv + block_m * block_n) // (warps * 32)
            if smem > smem_limit or warps * 32 > max_threads or regs > 128:
                continue
            config = AttentionConfig(BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages,
                                     input_precision=precision if fp32 else None)
            if config not in configs:
                configs.append(config)
        if not fp32 and has_tma(arch) and detail["batch_rank"] <= 2 and configs:
            # Hopper: the first tile again with q, k and v fetched by TMA (rank-4 descriptors over [batch, heads,
            # seq, dim], zero-filled past the sequence), second. Measured (kernelwright bench, run 39, H200,
            # 2026-12-03), pointer -> TMA at 128 x 64, 4 warps, 3 stages: attention_sdpa_bf16 0.1859 -> 0.1873 ms,
            # attention_causal_fp16 0.1144 -> 0.1098; at 128 x 128, 8 warps TMA was the slowest of both (0.222,
            # 0.136). The winners were pointer tiles (128 x 64 with 8 warps: 0.1745; 64 x 64: 0.1014).
            configs = [configs[0], configs[0].replace(variant="tma"), *configs[1:]]
        return configs

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, AttentionConfig.of(config), ident)


def _block_dim(size: int) -> int:
    return max(16, next_pow2(size))


def _scale_is_head_dim(scale: float, head_dim: int) -> bool:
    """Whether a scale is 1/sqrt(head_dim): written as a constant in the graph, but computed from the head dim
    in the problem (``q.shape[-1] ** -0.5``, SDPA's default), so the kernel recomputes it at run time."""
    return math.isclose(scale, head_dim ** -0.5, rel_tol=1e-6) and head_dim != 1

