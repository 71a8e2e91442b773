"""The convolution family: claims a convolution with its epilogue; its configurations are the two variants and,
for the implicit GEMM, tiles that fit the arch's shared memory."""

from __future__ import annotations

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
)
from kernelwright.generate.families.conv.config import ConvConfig
from kernelwright.generate.families.conv.growing import absorb_epilogue
from kernelwright.generate.families.conv.matching import match_convolution, roles
from kernelwright.generate.families.conv.writing import write
from kernelwright.generate.families.registry import register
from kernelwright.generate.graph import Node, ProblemGraph
from kernelwright.hardware import arch_spec

NAME = "conv"


@register
class ConvFamily:
    name = NAME
    priority = 30  # claim order: a convolution bounds its epilogue

    def claim(self, graph: ProblemGraph, node: Node, claimed: set[str], arch: str | None = None) -> Group | None:
        detail = match_convolution(graph, node, claimed)
        if detail is None:
            return None
        members = absorb_epilogue(graph, node, claimed, detail)
        return make_group(graph, NAME, members, anchor=node.name, shape=tuple(node.info.shape), **detail)

    def space(self, graph: ProblemGraph, group: Group, arch: str, policy: Policy = DEFAULT_POLICY) -> list[Config]:
        group_roles = roles(group)
        dtype = graph.info(group_roles.conv).dtype
        configs: list[ConvConfig] = []
        weight = graph.info(group_roles.weight).shape
        if not group_roles.transposed and group_roles.groups > 1 and weight[1] == 1:
            # Depthwise: the implicit GEMM's K block (16, the least tl.dot takes) would hold one channel and 15
            # masked ones, and ran level 3's MobileNet and EfficientNet blocks too slowly for the CPU proof
            # (2026-12-02). The direct kernel does the taps x 1 multiply-adds a pixel needs. Leads, not yet timed
            # on the H200: the tuner weighs them against the other variants.
            configs += [ConvConfig(variant="direct", BLOCK=b, num_warps=w) for b, w in ((1024, 4), (256, 2), (2048, 8))]
        nhwc: list[ConvConfig] = []
        if (group_roles.bn is not None or group_roles.pointwise) and len(weight) in (4, 5):
            # The library convolution on channels-last tensors (the input's copy our own kernel), its output read
            # channels-last by our epilogue (pixels x channels tiles) and written NCHW. On the H200 (runs 43, 47,
            # 2026-12-03, conv2d_bn_relu_bf16, 32 x 128 x 64 x 64, 3 x 3): the NCHW library variant spent 58.6 us
            # of 0.151 ms in cuDNN's own layout kernels (ncu); this one ran 0.1108 ms (do_bench, 64 x 64 tiles;
            # 128 x 32: 0.1137) against the NCHW library's 0.1512 in the same sweep (whose second pass read both
            # channels-last ones at 0.1945, not understood), and 0.1098 through the verifier (run 48, 1.09x
            # max-autotune) — first for half-precision 2-D convolutions (the other tile last). fp32, 3-D, grouped and
            # transposed ones not yet timed: both last there.
            nhwc = [ConvConfig(variant="library_nhwc", BLOCK_P=p, BLOCK_C=c, num_warps=4) for p, c in ((64, 64), (128, 32))]
        if group_roles.bn is not None or group_roles.pointwise:
            # The epilogue pass is memory-bound: one (image, channel) plane per program row, BLOCK pixels each.
            # Not for a bias alone: the library's convolution would then do all the reference does (the verifier
            # rejects that as no-own-kernel).
            # first only where it was measured: half precision, 2-D, ungrouped, not transposed
            if (dtype != torch.float32 and nhwc and len(weight) == 4 and group_roles.groups == 1
                    and not group_roles.transposed):
                configs.append(nhwc.pop(0))
            configs.append(ConvConfig(variant="library", BLOCK=1024, num_warps=4))
        if (dtype != torch.float32 and has_tma(arch) and not group_roles.transposed and group_roles.groups == 1
                and all(st == 1 for st in group_roles.stride)):
            # Stride 1: a tap's input pixels for a tile of output pixels are one box of the channels-last input,
            # so TMA fetches the A tiles (zero-filling the padding) and the K loop has no address arithmetic or
            # masks. Measured (kernelwright bench, run 39, H200, 2026-12-03; conv2d_bn_relu_bf16, 32 x 128 x 64 x 64,
            # 3 x 3): TMA 0.2217 / 0.2186 ms (the two tiles below), the pointer implicit GEMM 0.2158-0.2759, cuDNN
            # with our epilogue pass 0.1507 — about 180 TFLOP/s, a third of the GEMM template's rate: not yet
            # understood (the 4-D box reshaped for the dot is the first suspect). After the library variant.
            configs += [ConvConfig(variant="tma", BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3,
                                   precision="half"),
                        ConvConfig(variant="tma", BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=4,
                                   precision="half"),
                        # 64 output pixels a tile: a box of one row ([1, 1, 64, BLOCK_K]) — one non-unit dimension
                        # before the channels, as the batched GEMM's fast rank-3 boxes — against the two of the
                        # 128-pixel tiles' [1, 2, 64, BLOCK_K] (64-wide images). Leads, not yet timed.
                        ConvConfig(variant="tma", BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4,
                                   precision="half"),
                        ConvConfig(variant="tma", BLOCK_M=64, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3,
                                   precision="half")]
        # Channels-last first where a group has the channels to fill a K block (a transposed one's weight is
        # [C_in, C_out / groups, *taps]); NCHW first with fewer.
        wide = (weight[0] // group_roles.groups if group_roles.transposed else weight[1]) >= 16
        first, second = ("nhwc", "nchw") if wide else ("nchw", "nhwc")
        if dtype == torch.float32:
            # fp32 IEEE dots run on the FMA units: modest tiles keep the accumulator and operands in registers.
            tiles = [(64, 64, 16, 4, 2, "nchw", "ieee"), (128, 64, 16, 8, 2, "nchw", "ieee"),
                     (64, 64, 32, 4, 2, "nhwc", "ieee"), (32, 64, 16, 4, 2, "nchw", "ieee")]
            if policy.allow_tf32:
                tiles = [(128, 128, 32, 8, 3, "nchw", "tf32"), (128, 64, 32, 4, 3, "nhwc", "tf32"),
                         (64, 64, 32, 4, 3, "nchw", "tf32")]
            elif has_feature(arch, "tf32"):
                # 3xTF32 (hi*hi + hi*lo + lo*hi on TF32 tensor cores) is fp32-accurate by construction: the fp32
                # GEMMs' way past cuBLAS (KernelBench level 1's fp32 matmuls at 1.46-1.63x eager against the FMA
                # tiles' 0.73-0.87x, runs 57 and 61, H200, 2026-12-04). Its wgmma reads TF32 operands K-major only:
                # the filter is laid out [taps, C_out, C_in] (C_in, the K run, contiguous) and the input
                # channels-last where it has channels enough to fill a K block (transposed ones too: their
                # filter, [C_in, C_out / groups, *taps], is laid out the same way). Before the FMA tiles; a lead,
                # not yet timed on the H200 for convolutions.
                tiles = [(128, 128, 32, 8, 3, first, "tf32x3"), (128, 64, 32, 4, 3, first, "tf32x3"),
                         (64, 64, 32, 4, 3, second, "tf32x3"), *tiles]
        else:
            # Tensor cores (HGMMA on sm_90): M a multiple of 64 per warpgroup; K 32-64 per stage. Leads until
            # timed. "nhwc" (channels-last, at any rank) copies the input to channels-last first (one extra read and
            # write of it) so that the patch loads run along channels: 128-bit loads instead of the 16-bit gathers
            # along NCHW rows seen in the sm_90a SASS. With few input channels (per group) the NCHW gather wastes
            # less, so it goes first there.
            tiles = [(128, 128, 64, 8, 3, first, "half"), (128, 128, 64, 8, 3, second, "half"),
                     (128, 64, 64, 4, 3, first, "half"), (128, 128, 32, 8, 4, first, "half"),
                     (64, 64, 32, 4, 3, first, "half")]
        spec = arch_spec(arch)
        limit = spec.shared_memory_per_block_optin_bytes - spec.reserved_shared_per_block_bytes
        for bm, bn, bk, warps, stages, layout, precision in tiles:
            if (bm * bk + bk * bn) * dtype.itemsize * stages > limit:
                continue
            configs.append(ConvConfig(variant="implicit_gemm", BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps,
                                      num_stages=stages, layout=layout, precision=precision,
                                      w_kmajor=True if precision == "tf32x3" else None))
        return configs + nhwc

    def render(self, graph: ProblemGraph, group: Group, config: Config, ident: str) -> Rendered:
        return write(graph, group, ConvConfig.of(config), ident)
