"""The GEMM family: claims a matmul with its glue and epilogue; its configurations are tiles per precision that
fit the arch's shared memory."""

from __future__ import annotations

import math

import torch

from kernelwright.generate.families.base import (
    DEFAULT_POLICY,
    Config,
    Group,
    Policy,
    Rendered,
    has_feature,
    has_tma,
    make_group,
    sm_count,
)
from kernelwright.generate.families.gemm.config import GemmConfig
from kernelwright.generate.families.gemm.cuda import cuda_space, write_cuda
from kernelwright.generate.families.gemm.growing import grow
from kernelwright.generate.families.gemm.matching import ANCHORS, match_matmul
from kernelwright.generate.families.gemm.model import GemmPlan, dim_size
from kernelwright.generate.families.gemm.writing import write
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph

NAME = "gemm"

# -------------------------------------------------------------------------------------------- configurations
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps), default first. All are leads until timed on the
# H200, where the project measured cuBLAS at ~758 TFLOP/s bf16, ~728 fp16 and ~50 fp32 (IEEE) on large square
# GEMMs. Register counts below are from sm_90a cross-compiles at 4096^3 (triton 3.6 and 3.9).
_HALF_CONFIGS = (
    (128, 128, 64, 8, 4, 8),  # two warpgroups of 64x128 wgmma, 128 KiB of stages; 110-160 registers
    (128, 256, 64, 8, 3, 8),  # Triton's tutorial pick for Hopper; 144 KiB; 222-242 registers (an erf-GELU
    #                           epilogue spills 32 words a thread)
    (256, 128, 64, 8, 3, 8),  # the same, transposed: for N much smaller than M
    (64, 128, 64, 8, 4, 4),  # one warpgroup: more tiles in flight for mid-sized problems
    (128, 64, 64, 8, 4, 4),
    (64, 64, 64, 8, 4, 4),  # small or skinny problems: enough programs for 132 SMs
)
# fp32 without TF32 runs as SIMT FMA (Triton's FMA dot): no tensor cores, smaller K steps, 32-64 accumulators
# a thread to keep the FMA pipes fed. Leads against cuBLAS's ~50 TFLOP/s.
_FP32_CONFIGS = (
    (128, 128, 32, 8, 3, 8),  # cuBLAS's classic SIMT tile (8x8 outputs a thread); 190-248 registers
    (128, 64, 32, 8, 3, 4),
    (64, 128, 32, 8, 3, 4),
    (64, 64, 32, 8, 4, 4),  # 128-162 registers: two or three programs an SM
    (128, 128, 16, 8, 4, 8),
)
# TF32 tensor cores (only with Policy.allow_tf32): the 16-bit tiles with half the K step (4-byte operands).
_TF32_CONFIGS = (
    (128, 128, 32, 8, 4, 8),
    (128, 256, 32, 8, 3, 8),
    (64, 128, 32, 8, 4, 4),
    (128, 64, 32, 8, 4, 4),
    (64, 64, 32, 8, 4, 4),
)
# Split-precision TF32 (3xTF32: hi*hi + hi*lo + lo*hi) is fp32-accurate by construction, and the verifier's
# SASS check knows it (a note, not a TF32 shortcut); its numerics show only on a GPU (the interpreter computes
# every dot in exact fp32), where the verifier's scaled and heavy-tailed trials judge them. It is the only way past
# cuBLAS's fp32 on Hopper (FFMA tops out at ~50 TFLOP/s): linear_relu's 3xTF32 candidate, its weight K-major,
# 1.8816 ms against cuBLAS's 2.7384 (1.46x; run 33, H200, 2026-12-02), where matmul_fp32's, B row-major, took
# 3.879 ms. wgmma's TF32 operands have no transposed form, so a row-major B is transposed on its way into shared
# memory (the sm_90a PTX of a 128 x 128 x 32 tile: 48 shared stores a K step against 24 with B K-major), hence
# ``kmajor``: the launcher copies an operand laid out otherwise K-major first (one pass over it, in the forward's
# time; 64 MB for a 4096^2 B, ~0.03 ms at the H200's copy rate) and B's tile is loaded N x K. Offered first for
# fp32 problems (issue 29), the FMA tiles after it; the TMA form is a lead, not yet timed.
_TF32X3_CONFIGS = (
    (128, 128, 32, 8, 3, 8),
    (128, 64, 32, 8, 4, 4),
)
_DEFAULT_SMEM_LIMIT = 48 * 1024  # an arch the knowledge base does not know: what every CUDA GPU allows


def _smem_limit(arch: str) -> int:
    try:
        from kernelwright.hardware import arch_spec

        return arch_spec(arch).shared_memory_per_block_optin_bytes
    except Exception:  # an arch name the knowledge base does not know
        return _DEFAULT_SMEM_LIMIT


def _wide_first(entries: tuple[tuple[int, ...], ...], graph: ProblemGraph, plan: GemmPlan,
                arch: str) -> tuple[tuple[int, ...], ...]:
    """The half-precision tiles, 128 x 256 first where it still fills every SM. Measured through the verifier
    (runs 31-32, H200, 2026-12-02): 128 x 256 beat the 128 x 128 default on all five large GEMMs of the suite —
    matmul_bf16 8192^3 1.80 -> 1.62 ms, matmul 4096^3 0.235 -> 0.209, linear_gelu_bf16 1.196 -> 1.002,
    mlp_block_bf16 2.32 -> 2.22; transformer_attention_fp16's projection 0.283 -> 0.273, 256 x 128 0.264) — and a
    60 s budget tunes only two candidates of such a GEMM, so the order decides the row."""
    shape = graph.info(plan.anchor).shape
    sms = sm_count(arch)
    tiles = math.prod(shape[:-2]) * -(-shape[-2] // 128) * -(-shape[-1] // 256)
    wide = [e for e in entries if e[:2] == (128, 256)]
    # A skinny or small matrix would mask most of a wide tile, however many of them a batch makes.
    if tiles < sms or not wide or shape[-2] < 128 or shape[-1] < 256:
        return entries
    return (*wide, *(e for e in entries if e[:2] != (128, 256)))


def _half_space(entries: tuple[tuple[int, ...], ...], arch: str) -> list[GemmConfig]:
    """The half-precision configurations: where the arch has the tensor-memory accelerator, every tile as the TMA
    variant (descriptor loads, a persistent grid), the first also four stages deep with Triton's warp
    specialisation, then the first two as the cp.async one.

    Measured (scripts/family_sweep.py --grid variant=pointer,tma, run 37, H200, triton 3.6, 2026-12-02; ms,
    cp.async -> TMA at the same tile): 128 x 256 — matmul_bf16 8192^3 1.614 -> 1.558, matmul fp16 4096^3 0.2022
    -> 0.1967, linear_gelu_bf16 0.973 -> 0.894, bmm_fp16 0.241 -> 0.224, mlp_block_bf16 2.130 -> 1.626 (its
    K-major weights read in place through transposed descriptors); 128 x 128 — better on four of the five
    (linear_gelu 1.206 -> 0.927), worse on matmul_bf16 (1.773 -> 1.829). matmul_bf16 at 128 x 256 with 4
    stages and warp specialisation 1.520 (3 stages without: 1.550). fp32's FMA dot is not offered TMA: its tiles
    read from the TMA's swizzled layout ran 55-77x slower (linear_relu 3.27 -> 181.6 ms)."""
    pointer = [_config(e, "native") for e in entries]
    if not has_tma(arch):
        return pointer
    tma = [c.replace(variant="tma") for c in pointer]
    deep = tma[0].replace(num_stages=4, warp_specialize=True)
    return [tma[0], deep, *tma[1:], *pointer[:2]]


# Split K where the output has too few tiles for the SMs but K is long (KernelBench level 1's 6_Matmul_with_large_K:
# 256 x 256 from K = 524,288 is 4 tiles of 128 x 128 for 132 SMs): shares of K reduced by separate programs into
# an fp32 workspace, then a kernel summing them in a fixed order with the epilogue. Offered first there: the first
# pointer configuration's tile with about one program an SM, then a 64 x 64 tile (4 warps) with about two (the
# other way round where the output is smaller than the big tile).
# Measured on 6_ (3xTF32, family sweep, H200, 2026-12-04; eager 1.307 ms): 128 x 128 in 16 / 32 / 64 shares
# 2.139 / 1.236 / 1.285 ms, 64 x 64 in 16 / 32 / 64 1.539 / 1.696 / 1.439.
_SPLIT_MIN_K_STEPS = 64  # K steps a tile would walk alone before splitting pays for the workspace pass


def _mkn(plan: GemmPlan) -> tuple[int, int, int]:
    """The GEMM's M, K and N at the traced sizes."""
    (m, k), n = (dim_size(d) for d in plan.a.dims[-2:]), dim_size(plan.b.dims[-1])
    return m, k, n


def _split_k_first(configs: list[GemmConfig], plan: GemmPlan, arch: str) -> list[GemmConfig]:
    if plan.batched:
        return configs
    m, k, n = _mkn(plan)
    pointer = next((c for c in configs if (c.variant or "pointer") == "pointer"), None)
    if pointer is None:
        return configs
    sms = sm_count(arch)
    if -(-m // 64) * -(-n // 64) >= sms:  # 64 x 64 tiles already fill the SMs: the space's own small tiles will
        return configs
    split: list[GemmConfig] = []
    small = pointer.replace(BLOCK_M=64, BLOCK_N=64, num_warps=4)  # 64 x 64: one warpgroup
    order = [(pointer, 1), (small, 2)]
    if m < pointer.BLOCK_M or n < pointer.BLOCK_N:  # the big tile would be mostly masked
        order.reverse()
    for tile, per_sm in order:
        tiles = -(-m // tile.BLOCK_M) * -(-n // tile.BLOCK_N)
        steps = -(-k // tile.BLOCK_K)
        if tiles >= sms or steps < _SPLIT_MIN_K_STEPS:
            continue
        shares = 1 << max(1, (per_sm * sms // tiles).bit_length() - 1)  # a power of two, at least 2
        shares = min(shares, steps // 16, 256)  # each share at least 16 K steps
        if shares >= 2:
            split.append(tile.replace(split_k=shares))
    return [*split, *configs]


def _tf32x3_space(arch: str, plan: GemmPlan) -> list[GemmConfig]:
    """fp32 at TF32 tensor-core speed and fp32 accuracy: 3xTF32 with both operands K-major (the copy where they are
    not is the launcher's), B's tile loaded N x K; where the arch has TMA, the first tile again through tensor
    descriptors (B's over its K-major transpose). Only where the arch has TF32 tensor cores (sm_80 on).

    Which goes first is measured (family sweeps, H200, 2026-12-04; ms, cp.async pointer form -> TMA, same tile):
    1_Square 4096^3 1.988 -> 1.898, 17_transposed_B 1.849 -> 1.770, 16_transposed_A 2.215 -> 2.135; but
    8_irregular_shapes (8205 x 2949 x 5921) 4.371 -> 9.073. TMA leads where M, N and K are all multiples of 16,
    the pointer form (its K padded to 16) elsewhere."""
    if not has_feature(arch, "tf32"):
        return []
    pointer = [_config(c, "tf32x3").replace(kmajor=True, b_tile="nk") for c in _TF32X3_CONFIGS]
    if not has_tma(arch):
        return pointer
    tma = _config(_TF32X3_CONFIGS[0], "tf32x3").replace(kmajor=True, variant="tma")
    if all(size % 16 == 0 for size in _mkn(plan)):
        return [tma, *pointer]
    return [pointer[0], tma, *pointer[1:]]


def _config(entry: tuple[int, ...], precision: str) -> GemmConfig:
    bm, bn, bk, group_m, stages, warps = entry
    return GemmConfig(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, num_stages=stages, num_warps=warps,
                      precision=precision)


def smem_bytes(config: GemmConfig, itemsize: int) -> int:
    """Shared memory the K loop's operand stages take: stages x (A tile + B tile)."""
    bm, bn, bk = config.BLOCK_M, config.BLOCK_N, config.BLOCK_K
    return config.num_stages * (bm * bk + bk * bn) * itemsize


@register
class GemmFamily:
    name = NAME
    priority = 20  # claim order: a matmul bounds its prologues and epilogues

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        if node.name in claimed or node.op not in ANCHORS:
            return None
        mm = match_matmul(graph, node, claimed)
        if mm is None:
            return None
        plan, members = grow(graph, mm, claimed)
        return make_group(graph, NAME, members, anchor=node.name, gemm=plan)

    def space(self, graph: ProblemGraph, group: Group, arch: str,
              policy: Policy = DEFAULT_POLICY) -> list[Config]:
        plan: GemmPlan = group.detail["gemm"]
        if plan.a.dtype != torch.float32:
            # The CUDA C++ kernels (the ``cuda`` back end) after the Triton ones: leads, untimed on a GPU so far,
            # and a first build of each takes a minute (torch's headers); ``--backend cuda`` puts them alone.
            configs = _half_space(_wide_first(_HALF_CONFIGS, graph, plan, arch), arch) + cuda_space(graph, group, arch)
        elif policy.allow_tf32:
            configs = [_config(c, "tf32") for c in _TF32_CONFIGS] + [_config(_FP32_CONFIGS[0], "ieee").replace(
                b_copy=True)]
        else:
            configs = _tf32x3_space(arch, plan)
            # The FMA dot: a K-major B (nn.Linear's weight) copied N-major first (writing.py has the figures).
            configs += [_config(c, "ieee").replace(b_copy=True) for c in _FP32_CONFIGS]
        configs = _split_k_first(configs, plan, arch)
        itemsize = max(plan.a.load_dtype.itemsize, plan.b.load_dtype.itemsize, plan.a.dtype.itemsize)
        limit = _smem_limit(arch)
        fitting = [c for c in configs if smem_bytes(c, itemsize) <= limit]
        if fitting:
            return fitting
        smallest = min(configs, key=lambda c: smem_bytes(c, itemsize))
        return [smallest.replace(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_stages=2, num_warps=4)]

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        config = GemmConfig.of(config)
        if config.backend == "cuda":
            return write_cuda(graph, group, config, ident)
        return write(graph, group, config, ident)

