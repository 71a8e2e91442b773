"""The source of a convolution group in either variant: a library convolution and our epilogue kernel, or one
implicit-GEMM Triton kernel; the epilogue (bias, batch norm, pointwise nodes) is written once for both."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kernelwright.generate import expr
from kernelwright.generate.families import base
from kernelwright.generate.families.base import Group, Rendered
from kernelwright.generate.families.conv.config import ConvConfig
from kernelwright.generate.families.conv.matching import roles
from kernelwright.generate.families.conv.spatial import (
    Spatial,
    channels_last_copy,
    gemm_k_loop,
    pixel_channel_tile,
    unflatten,
)
from kernelwright.generate.families.conv.transposed import (
    phase_sizes,
    transposed_main_loop,
    transposed_weight_line,
)
from kernelwright.generate.graph import ProblemGraph
from kernelwright.generate.operators import CONSTANTS


def write(graph: ProblemGraph, group: Group, config: ConvConfig, ident: str) -> Rendered:
    renderer = _Renderer(graph, group, config, ident)
    variant = config.variant
    if variant == "tma":
        return renderer.tma_gemm()
    if variant == "library_nhwc":
        return renderer.library_nhwc()
    return renderer.library() if variant == "library" else renderer.direct() if variant == "direct" else \
        renderer.implicit_gemm()


# A filter of more taps than this is walked in a loop rather than unrolled (a 7 x 7 depthwise filter unrolls).
UNROLLED_TAPS = 64


class _Renderer:
    """Source for one convolution group and one configuration."""

    def __init__(self, graph: ProblemGraph, group: Group, config: ConvConfig, ident: str) -> None:
        self.graph, self.group, self.config, self.ident = graph, group, config, ident
        self.roles = roles(group)
        self.shape: tuple[int, ...] = tuple(group.detail["shape"])
        self.dtype = graph.info(self.roles.conv).dtype
        r = self.roles
        self.spatial = Spatial(len(self.shape) - 2)
        self.grouped = r.groups > 1
        self.channel_params = [p for p in (r.bias, r.bn_weight, r.bn_bias, r.bn_mean, r.bn_var) if p is not None]
        self.operands = base.outside_reads(graph, group, r.pointwise)  # tensors the pointwise epilogue reads
        self.modes = {v: base.operand_mode(graph.info(v), self.shape) for v in self.operands}

    # -- the epilogue, shared by both variants ---------------------------------------------------------------
    def _epilogue(self, conv_value: str, ctx: _Indexing) -> tuple[list[str], dict[str, expr.Value]]:
        """Lines that turn the convolution's fp32 value into every output's value."""
        r = self.roles
        lines = [f"ch_{p} = {ctx.channel(p)}" for p in self.channel_params]  # per-channel parameters, in fp32
        value = conv_value
        if r.bias is not None:
            lines.append(f"conv = {value} + ch_{r.bias}")
            value = "conv"
        env: dict[str, expr.Value] = {r.conv: expr.Value(value, torch.float32)}
        if r.bn is not None:
            # Eval-mode batch norm as PyTorch computes it: (y - mean) * (weight / sqrt(var + eps)) + bias, in fp32.
            # Correctly rounded sqrt and division (Triton's "/" and rsqrt are approximate on the GPU); the
            # difference y - mean is kept, not folded into a shift, so no cancellation is introduced.
            std = f"tl.sqrt_rn(ch_{r.bn_var} + {r.bn_eps!r})"
            scale = f"tl.div_rn(ch_{r.bn_weight}, {std})" if r.bn_weight is not None else f"1.0 / {std}"
            lines.append(f"bn_scale = {scale}")
            shift = f" + ch_{r.bn_bias}" if r.bn_bias is not None else ""
            lines.append(f"normed = ({value} - ch_{r.bn_mean}) * bn_scale{shift}")
            env[r.bn] = expr.Value("normed", torch.float32)
        for v in self.operands:
            info = self.graph.info(v)
            load = ctx.load(v, self.modes[v], base.live_dims(info.shape, self.shape))
            line, env[v] = base.load_line(v, load, info.dtype)
            lines.append(line)
        emitter = expr.PointwiseEmitter()
        emitter.emit_all((self.graph.node(n) for n in self.group.nodes if n in r.pointwise or
                          self.graph.node(n).op in CONSTANTS), env)
        return lines + emitter.lines, env

    def _stores(self, env: dict[str, expr.Value], offset: str, mask: str) -> list[str]:
        return [f"tl.store(out_{o} + ({offset}), {env[o].expr}.to({expr.TL_DTYPE[self.graph.info(o).dtype]}), "
                f"mask={mask})" for o in self.group.outputs]

    def _plane_epilogue(self, value: str, coords: Sequence[str]) -> list[str]:
        """The epilogue and stores of a kernel whose program row is one (image, channel) plane (``image``,
        ``channel``, the pixel's ``coords``, ``offs`` and ``mask`` defined): per-channel parameters are scalars."""
        ctx = _Indexing(channel_load="tl.load(in_{v} + channel).to(tl.float32)",
                        dims={0: "image", 1: "channel", **dict(zip(self.spatial.dims(), coords))},
                        vector_dims=tuple(self.spatial.dims()), flat="offs", masks={"all": "mask", "vector": "mask"})
        lines, env = self._epilogue(value, ctx)
        return lines + self._stores(env, "offs", "mask")

    def _tile_epilogue(self, *, image: str, channels: str, rows: str, cols: str, mask: str, flat: str) -> list[str]:
        """The epilogue and stores of a kernel whose tile is output pixels (rows, mask ``rows``) x output channels
        (columns: ``channels``, mask ``cols``) — the implicit GEMM's and the direct depthwise kernel's. ``image``
        is the tile's image index: a column vector where the rows span images (the GEMM's M), else a scalar."""
        sp = self.spatial
        ctx = _Indexing(channel_load=f"tl.load(in_{{v}} + {channels}, mask={cols}, other=0).to(tl.float32)[None, :]",
                        dims={0: image, 1: f"{channels}[None, :]", **{d: f"{c}[:, None]" for d, c in zip(sp.dims(),
                                                                                                       sp.coords)}},
                        vector_dims=(*((0,) if "[" in image else ()), 1, *sp.dims()), flat=flat,
                        masks={"all": mask, "rows": f"{rows}[:, None]", "cols": f"{cols}[None, :]"})
        lines, env = self._epilogue("acc", ctx)
        return lines + self._stores(env, flat, mask)

    def _image_tile(self) -> list[str]:
        """A program's tile of BLOCK_P output pixels x BLOCK_C output channels of one image (pixel_channel_tile):
        its indices, masks and the pixels' coordinates."""
        sp = self.spatial
        return [
            f"n_pix = {' * '.join(sp.out_sizes)}",
            *pixel_channel_tile(),
            "p_mask = pixels < n_pix",
            "c_mask = channel < n_channels",
            "mask = p_mask[:, None] & c_mask[None, :]  # pixels are rows, channels columns",
            *unflatten("pixels", sp.coords, sp.out_sizes),
        ]

    def _nchw_tile_epilogue(self) -> list[str]:
        """The epilogue of a pixels x channels tile (_image_tile), stored into the NCHW output."""
        return ["offs = (image * n_channels + channel)[None, :] * n_pix + pixels[:, None]  # NCHW",
                *self._tile_epilogue(image="image", channels="channel", rows="p_mask", cols="c_mask", mask="mask",
                                     flat="offs")]

    def _strided(self) -> list[str]:
        return [v for v in self.operands if self.modes[v] == "strided"]

    def _output_shape_lines(self) -> list[str]:
        r, sp = self.roles, self.spatial
        lines = [f"    batch, in_channels, {', '.join(sp.in_names)} = {r.x}.shape"]
        sizes = zip(sp.in_names, sp.kernel_names, sp.out_names, r.stride, r.padding, r.dilation, r.output_padding)
        if r.transposed:
            lines += [
                f"    _, out_group, {', '.join(sp.kernel_names)} = {r.weight}.shape  # [C_in, C_out / groups, *taps]",
                f"    groups = {r.groups}  # the module's: a transposed convolution's filter does not say them",
                "    in_group, out_channels = in_channels // groups, out_group * groups",
            ]
            for size, k, out, s, p, d, op in sizes:
                lines.append(f"    {out} = ({size} - 1) * {s} - {2 * p} + {d} * ({k} - 1) + {op + 1}")
        else:
            group_channels = "in_group" if self.grouped else "_"
            lines.append(f"    out_channels, {group_channels}, {', '.join(sp.kernel_names)} = {r.weight}.shape")
            for size, k, out, s, p, d, _ in sizes:
                lines.append(f"    {out} = ({size} + {2 * p} - {d} * ({k} - 1) - 1) // {s} + 1")
            if self.grouped:
                lines.append("    groups = in_channels // in_group  # from the tensors: a second shape may change it")
        lines.append(f"    shape = (batch, out_channels, {', '.join(sp.out_names)})")
        return lines

    def _allocate(self) -> list[str]:
        return [f"    out_{o} = torch.empty(shape, dtype={self.graph.info(o).dtype}, device={self.roles.x}.device)"
                for o in self.group.outputs]

    def _describe(self) -> str:
        r = self.roles
        parts = ["transposed convolution" if r.transposed else "convolution"] + (["bias"] if r.bias else []) + (["batch norm (eval)"] if r.bn else [])
        parts += [self.graph.node(n).op for n in r.pointwise]
        return ", ".join(parts)

    def _head(self, kernel: str, params: Sequence[str], body: Sequence[str], kernel_doc: str, launcher_doc: str
              ) -> list[str]:
        """The kernel (signature, docstring, ``body``), then the launcher's signature, docstring and output sizes."""
        src = ["@triton.jit", f"def {kernel}({', '.join(params)}):", f'    """{self._describe()}: {kernel_doc}"""']
        src += [f"    {line}" for line in body]
        src += ["", "", f"def {self.ident}({', '.join(self.group.inputs)}):",
                f'    """{self._describe()}: {launcher_doc}"""']
        return src + self._output_shape_lines()

    # -- variant (a): library convolution + our epilogue ------------------------------------------------------
    def library(self) -> Rendered:
        r, ident, sp = self.roles, self.ident, self.spatial
        kernel = f"{ident}_epilogue"
        tensors = list(dict.fromkeys(["conv_out", *self.channel_params, *self.operands]))
        strided = self._strided()
        needs_hw = any(d >= 2 for v in strided for d in base.live_dims(self.graph.info(v).shape, self.shape))
        params = [f"in_{v}" for v in tensors] + [f"out_{o}" for o in self.group.outputs]
        params += ["n_channels", "n_pixels"] + (sp.plane_sizes[1:] if needs_hw else [])
        for v in strided:
            params += [f"stride_{v}_{d}" for d in range(len(self.shape))]
        params += ["BLOCK: tl.constexpr", "IDX64: tl.constexpr"]
        body = [
            "plane = tl.program_id(0)  # one (image, channel) plane of the output",
            "pixels = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)",
            "if IDX64:",
            "    plane = plane.to(tl.int64)",
            "mask = pixels < n_pixels",
        ]
        if self.channel_params or any(1 in base.live_dims(self.graph.info(v).shape, self.shape) for v in strided):
            body.append("channel = plane % n_channels")
        if any(0 in base.live_dims(self.graph.info(v).shape, self.shape) for v in strided):
            body.append("image = plane // n_channels")
        if needs_hw:
            body += unflatten("pixels", sp.plane_coords, sp.plane_sizes)
        body.append("offs = plane * n_pixels + pixels")
        body.append("y = tl.load(in_conv_out + offs, mask=mask, other=0).to(tl.float32)")
        body += self._plane_epilogue("y", sp.plane_coords)

        src = self._head(kernel, params, body, "the epilogue of a library convolution, one pass over its output; "
                         "per-channel parameters are scalars of the program.",
                         "aten.convolution without its bias (cuDNN on a GPU), then our fused epilogue kernel.")
        if self.dtype == torch.float32:
            src.append("    # fp32: cuDNN follows torch.backends.cudnn.allow_tf32, which the verifier sets from the "
                       "precision")
            src.append("    # policy (off for fp32 problems unless TF32 is allowed).")
        stride, padding, dilation = (f"[{', '.join(map(str, t))}]" for t in (r.stride, r.padding, r.dilation))
        src.append(f"    conv_out = torch.ops.aten.convolution.default({r.x}, {r.weight}, None, {stride}, "
                   f"{padding}, {dilation}, {r.transposed}, [{', '.join(map(str, r.output_padding))}], "
                   f"{'groups' if self.grouped or r.transposed else 1})")
        src.append(f"    conv_out = conv_out.contiguous()  # {sp.layout} (a no-op for {sp.layout} inputs)")
        src += base.operand_layout_lines(self.operands, self.modes)
        src += self._allocate()
        block = self.config.BLOCK
        n_pixels = " * ".join(sp.out_names)
        src.append(f"    block = min({block}, max(triton.next_power_of_2({n_pixels}), 128))")
        args = [*tensors, *(f"out_{o}" for o in self.group.outputs), "out_channels", n_pixels]
        args += sp.out_names[1:] if needs_hw else []
        args += [f"*{v}.stride()" for v in strided]
        src.append(f"    {kernel}[(batch * out_channels, triton.cdiv({n_pixels}, block))]({', '.join(args)}, "
                   "BLOCK=block, "
                   f"IDX64=conv_out.numel() >= 2**31, num_warps={self.config.num_warps})")
        src.append(f"    return ({', '.join(f'out_{o}' for o in self.group.outputs)},)")
        return Rendered(source="\n".join(src), launcher=ident, notes=("library convolution + own epilogue",))

    # -- variant (a'): library convolution on channels-last tensors + our transposing epilogue -----------------
    def library_nhwc(self) -> Rendered:
        """aten.convolution over channels-last copies of the input and the weight (the library then writes its
        output channels-last, with no layout change of its own after it), and our epilogue over tiles of BLOCK_P
        pixels x BLOCK_C channels of one image: loads along the channels, the stores along the pixels of the
        NCHW output."""
        r, ident, sp = self.roles, self.ident, self.spatial
        kernel = f"{ident}_epilogue"
        strided = self._strided()
        tensors = list(dict.fromkeys(["conv_out", *self.channel_params, *self.operands]))
        params = [f"in_{v}" for v in tensors] + [f"out_{o}" for o in self.group.outputs]
        params += ["n_channels", *sp.out_sizes]
        for v in strided:
            params += [f"stride_{v}_{d}" for d in range(len(self.shape))]
        params += ["BLOCK_P: tl.constexpr", "BLOCK_C: tl.constexpr", "IDX64: tl.constexpr"]
        body = [
            *self._image_tile(),
            "# the library's output is channels-last: (image, pixel, channel), channels contiguous",
            "acc = tl.load(in_conv_out + (image * n_pix + pixels)[:, None] * n_channels + channel[None, :], "
            "mask=mask, other=0).to(tl.float32)",
        ]
        body += self._nchw_tile_epilogue()
        src = self._head(kernel, params, body, "the epilogue of a library convolution whose output is channels-last, "
                         "tiles of pixels x channels of one image: read along the channels, written NCHW.",
                         "aten.convolution without its bias on channels-last tensors (cuDNN on a GPU), then our "
                         "fused epilogue kernel, which also restores the NCHW layout.")
        if self.dtype == torch.float32:
            src.append("    # fp32: cuDNN follows torch.backends.cudnn.allow_tf32, which the verifier sets from the "
                       "precision policy.")
        layout = "torch.channels_last" if sp.rank == 2 else "torch.channels_last_3d"
        stride, padding, dilation = (f"[{', '.join(map(str, t))}]" for t in (r.stride, r.padding, r.dilation))
        # The input's channels-last copy is our own kernel's: torch's (a generic permuting copy) took 90 us of a
        # 0.178 ms candidate for a 32 MiB bf16 input (ncu, run 46, H200, 2026-12-03, conv2d_bn_relu_bf16), beside
        # cuDNN's 61.0 us NHWC convolution and our 20.0 us epilogue. The weight is small: torch copies it.
        copy = f"{ident}_channels_last"
        src = [*channels_last_copy(copy), "", "", *src]
        src.append(f"    x_nhwc = {r.x} if {r.x}.is_contiguous(memory_format={layout}) else {copy}({r.x}.contiguous(), "
                   f"{layout})")
        src.append("    conv_out = torch.ops.aten.convolution.default(x_nhwc, "
                   f"{r.weight}.contiguous(memory_format={layout}), None, {stride}, {padding}, {dilation}, "
                   f"{r.transposed}, [{', '.join(map(str, r.output_padding))}], "
                   f"{'groups' if self.grouped or r.transposed else 1})")
        src.append(f"    conv_out = conv_out.contiguous(memory_format={layout})  # a no-op where the library "
                   "kept the layout")
        src += base.operand_layout_lines(self.operands, self.modes)
        src += self._allocate()
        n_pixels = " * ".join(sp.out_names)
        src += [f"    block_p = min({self.config.BLOCK_P}, max(triton.next_power_of_2({n_pixels}), 16))",
                f"    block_c = min({self.config.BLOCK_C}, triton.next_power_of_2(out_channels))"]
        args = [*tensors, *(f"out_{o}" for o in self.group.outputs), "out_channels", *sp.out_names]
        args += [f"*{v}.stride()" for v in strided]
        src.append(f"    {kernel}[(batch * triton.cdiv(out_channels, block_c) * triton.cdiv({n_pixels}, block_p),)]("
                   f"{', '.join(args)}, BLOCK_P=block_p, BLOCK_C=block_c, IDX64=conv_out.numel() >= 2**31, "
                   f"num_warps={self.config.num_warps})")
        src.append(f"    return ({', '.join(f'out_{o}' for o in self.group.outputs)},)")
        return Rendered(source="\n".join(src), launcher=ident,
                        notes=("library convolution on channels-last tensors + own transposing epilogue",))

    # -- variant (c): a direct depthwise convolution ----------------------------------------------------------
    def direct(self) -> Rendered:
        """One input channel per group (depthwise; ``mult`` output channels each): every output pixel is a dot of
        its patch with one filter of the channel, taps x 1 multiply-adds — no matrix to give a tensor core. A
        program is a tile of BLOCK_P pixels x BLOCK_C channels of one image (several channels where the image is
        small: a 7 x 7 MobileNet layer fills 1024 lanes with 16 channels, not one channel and 975 masked lanes), the
        filter's taps unrolled, one weight a channel a tap, the epilogue applied before the one store."""
        r, ident, sp = self.roles, self.ident, self.spatial
        kernel = f"{ident}_kernel"
        strided = self._strided()
        tensors = list(dict.fromkeys([r.x, r.weight, *self.channel_params, *self.operands]))
        params = [f"in_{v}" for v in tensors] + [f"out_{o}" for o in self.group.outputs]
        params += ["n_channels", "mult", *sp.sizes, *sp.out_sizes, "sx_n", "sx_c", *sp.x_strides, "sw_o",
                   *sp.w_strides]
        for v in strided:
            params += [f"stride_{v}_{d}" for d in range(len(self.shape))]
        params += [f"{k}: tl.constexpr" for k in sp.tap_sizes]
        params += ["BLOCK_P: tl.constexpr", "BLOCK_C: tl.constexpr", "IDX64: tl.constexpr"]
        taps = " * ".join(sp.tap_sizes)
        starts = [f"{c}0" for c in sp.in_coords]
        inside = " & ".join(f"({c} >= 0) & ({c} < {n})" for c, n in zip(sp.in_coords, sp.sizes))
        patch = " + ".join(f"{c} * {st}" for c, st in zip(sp.in_coords, sp.x_strides))
        tap = " + ".join(f"{k} * {st}" for k, st in zip(sp.taps, sp.w_strides))
        loop = "tl.static_range" if math.prod(self._taps()) <= UNROLLED_TAPS else "range"
        body = [
            *self._image_tile(),
            *(f"{start} = {base.affine(c, st, -pd)}" for start, c, st, pd in zip(starts, sp.coords, r.stride,
                                                                                     r.padding)),
            "x_start = image * sx_n + (channel // mult) * sx_c  # the input channel each output channel reads",
            "w_start = channel * sw_o",
            "acc = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)",
            f"for tap in {loop}({taps}):",
            *(f"    {line}" for line in unflatten("tap", sp.taps, sp.tap_sizes)),
            *(f"    {c} = {start} + {base.affine(k, d, 0)}" for c, start, k, d in zip(sp.in_coords, starts, sp.taps,
                                                                                       r.dilation)),
            f"    inside = p_mask & {inside}",
            f"    x_tap = tl.load(in_{r.x} + ({patch})[:, None] + x_start[None, :],",
            "                    mask=inside[:, None] & c_mask[None, :], other=0)",
            f"    w_tap = tl.load(in_{r.weight} + w_start + {tap}, mask=c_mask, other=0)",
            "    acc += x_tap.to(tl.float32) * w_tap.to(tl.float32)[None, :]",
        ]
        body += self._nchw_tile_epilogue()

        src = self._head(kernel, params, body, "a direct depthwise convolution (one input channel a group), a tile "
                         "of pixels x channels of one image a program, the epilogue applied before the store.",
                         "one Triton kernel, a direct depthwise convolution.")
        src.append("    mult = out_channels // groups  # output channels per input channel")
        src += base.operand_layout_lines(self.operands, self.modes)
        src += self._allocate()
        n_pixels = " * ".join(sp.out_names)
        block = self.config.BLOCK
        src += [f"    block_p = min({block}, max(triton.next_power_of_2({n_pixels}), 16))",
                f"    block_c = min(triton.next_power_of_2(out_channels), max(1, {block} // block_p))  # small images: "
                "several channels a program"]
        args = [*tensors, *(f"out_{o}" for o in self.group.outputs), "out_channels", "mult", *sp.in_names,
                *sp.out_names, f"*{r.x}.stride()", f"{r.weight}.stride(0)",
                *(f"{r.weight}.stride({2 + i})" for i in range(sp.rank))]
        args += [f"*{v}.stride()" for v in strided]
        big = f"max({r.x}.numel(), math.prod(shape)) >= 2**31"
        tap_args = ", ".join(f"{k}={n}" for k, n in zip(sp.tap_sizes, sp.kernel_names))
        src.append(f"    {kernel}[(batch * triton.cdiv(out_channels, block_c) * triton.cdiv({n_pixels}, block_p),)]("
                   f"{', '.join(args)}, {tap_args}, BLOCK_P=block_p, BLOCK_C=block_c, IDX64={big}, "
                   f"num_warps={self.config.num_warps})")
        src.append(f"    return ({', '.join(f'out_{o}' for o in self.group.outputs)},)")
        return Rendered(source="\n".join(src), launcher=ident, notes=("direct depthwise convolution",))

    def _taps(self) -> tuple[int, ...]:
        return tuple(self.graph.info(self.roles.weight).shape[2:])

    # -- variant (b): implicit-GEMM Triton convolution --------------------------------------------------------
    def implicit_gemm(self) -> Rendered:
        r, ident, sp = self.roles, self.ident, self.spatial
        kernel = f"{ident}_kernel"
        strided = self._strided()
        tensors = [r.x, r.weight, *self.channel_params, *self.operands]
        tensors = list(dict.fromkeys(tensors))  # a residual may be the input itself
        channels = ["c_in_g", *sp.sizes, "c_out", "groups"] if self.grouped else ["c_in", *sp.sizes, "c_out"]
        params = [f"in_{v}" for v in tensors] + [f"out_{o}" for o in self.group.outputs]
        params += ["n_img", *channels, *sp.out_sizes, "sx_n", "sx_c", *sp.x_strides, "sw_c", "sw_o", *sp.w_strides]
        for v in strided:
            params += [f"stride_{v}_{d}" for d in range(len(self.shape))]
        params += [f"{k}: tl.constexpr" for k in sp.tap_sizes]
        params += ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr", "IDX64: tl.constexpr"]
        body = transposed_main_loop(r, sp, precision=self.config.precision, grouped=self.grouped,
                                    head=self._gemm_head(count="n_q")) if r.transposed else self._gemm_main_loop()
        body += self._tile_epilogue(image="img[:, None]", channels="offs_n", rows="m_mask", cols="n_mask",
                                    mask="dst_mask", flat="dst")

        src = self._head(kernel, params, body, "an implicit-GEMM convolution (M = output pixels, N = output channels, "
                         "K = taps x input channels) with the epilogue applied to the accumulator.",
                         "one Triton kernel, implicit GEMM.")
        src += self._gemm_launch(kernel, tensors, strided)
        return Rendered(source="\n".join(src), launcher=ident, notes=("implicit-GEMM convolution",))

    def _gemm_head(self, count: str = "n_pix") -> list[str]:
        """The program's tile: which output pixels (M) and output channels (N), within one group if grouped; M
        counts ``n_img * count`` pixels."""
        lines = ["pid = tl.program_id(0)"]
        if self.grouped:
            lines += [
                "c_out_g = c_out // groups  # output channels per group",
                "n_tiles_n = tl.cdiv(c_out_g, BLOCK_N)  # channel tiles per group",
                "pid_m = pid // (groups * n_tiles_n)  # neighbouring programs share the output pixels",
                "grp = pid // n_tiles_n % groups  # the group: a block of output channels, a slice of the input's",
                "pid_n = pid % n_tiles_n",
            ]
        else:
            lines += [
                "n_tiles_n = tl.cdiv(c_out, BLOCK_N)",
                "pid_m = pid // n_tiles_n  # neighbouring programs share the input tile (channel tiles vary fastest)",
                "pid_n = pid % n_tiles_n",
            ]
        sp = self.spatial
        lines += [
            f"n_pix = {' * '.join(sp.out_sizes)}",
            "if IDX64:",
            "    n_pix = n_pix.to(tl.int64)  # so that every offset below is computed in 64 bits",
            f"offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # output pixels, flattened over (image, "
            f"{', '.join(sp.out_sizes)})",
        ]
        if self.grouped:
            lines += [
                "offs_g = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channels within the group",
                "offs_n = grp * c_out_g + offs_g  # output channels",
                f"m_mask = offs_m < n_img * {count}",
                "n_mask = offs_g < c_out_g",
            ]
        else:
            lines += [
                "offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channels",
                f"m_mask = offs_m < n_img * {count}",
                "n_mask = offs_n < c_out",
            ]
        return lines

    def _gemm_main_loop(self) -> list[str]:
        """The kernel up to the accumulated tile and its output offsets: the K loop walks the filter taps and,
        inside each tap, the (group's) input channels BLOCK_K at a time."""
        r, sp = self.roles, self.spatial
        if self.config.precision == "half":
            dot = "acc = tl.dot(a, b, acc)"
        else:
            dot = f'acc = tl.dot(a, b, acc, input_precision="{self.config.precision}")'
        starts = [f"{c}0" for c in sp.in_coords]
        body = self._gemm_head() + ["img = offs_m // n_pix", "pix = offs_m % n_pix"]
        body += unflatten("pix", sp.coords, sp.out_sizes)
        for i, (start, coord, s, p) in enumerate(zip(starts, sp.coords, r.stride, r.padding)):
            note = "  # the patch's top-left corner in the input (may be padding)" if i == 0 else ""
            body.append(f"{start} = {base.affine(coord, s, -p)}{note}")
        tap_lines = [*unflatten("tap", sp.taps, sp.tap_sizes),
                     *(f"{c} = {start} + {base.affine(k, d, 0)}"
                       for c, start, k, d in zip(sp.in_coords, starts, sp.taps, r.dilation))]
        comment = [f"# K = ({', '.join(sp.taps)}, input channel): one filter tap at a time, its input channels "
                   "BLOCK_K at a time — one flat", "# loop, so the compiler pipelines every step."]
        body += gemm_k_loop(sp, r.x, r.weight, grouped=self.grouped, dot=dot, count=" * ".join(sp.tap_sizes),
                            comment=comment, tap_lines=tap_lines)
        body += [
            f"dst = (img * c_out * n_pix + pix)[:, None] + (offs_n * n_pix)[None, :]  # {sp.layout} output offsets",
            "dst_mask = m_mask[:, None] & n_mask[None, :]",
        ]
        return body

    def _gemm_launch(self, kernel: str, tensors: Sequence[str], strided: Sequence[str]) -> list[str]:
        """The launcher's lines after the output sizes: layouts, allocation, tile sizes, the launch."""
        r, config, sp = self.roles, self.config, self.spatial
        x, wt = r.x, r.weight
        src = []
        if config.layout == "nhwc":  # channels-last, whatever the rank
            if sp.rank == 1:
                src.append(f"    {x} = {x}.transpose(1, 2).contiguous().transpose(1, 2)  # patch loads along "
                           "channels")
            else:
                memory_format = "channels_last" if sp.rank == 2 else "channels_last_3d"
                src.append(f"    {x} = {x}.contiguous(memory_format=torch.{memory_format})  # patch loads along "
                           "channels")
        if r.transposed:
            src.append(transposed_weight_line(r, sp, kmajor=bool(config.w_kmajor)))
        elif config.w_kmajor:  # 3xTF32: wgmma reads TF32 operands K-major only (conv/family.py)
            order = ", ".join(map(str, [*sp.dims(), 0, 1]))
            src.append(f"    weight_t = {wt}.permute({order}).contiguous()  # [{', '.join(sp.taps)}, c_out, c_in]: "
                       "B K-major")
        else:
            order = ", ".join(map(str, [*sp.dims(), 1, 0]))
            src.append(f"    weight_t = {wt}.permute({order}).contiguous()  # [{', '.join(sp.taps)}, c_in, c_out]: "
                       "rows of B contiguous along N")
        src += base.operand_layout_lines(self.operands, self.modes)
        src += self._allocate()
        bm, bn, bk = config.BLOCK_M, config.BLOCK_N, config.BLOCK_K
        n_pixels = " * ".join(["batch", *sp.out_names])
        if self.grouped:
            out_g, in_g, tiles = "out_channels // groups", "in_group", "groups * triton.cdiv(out_channels // groups, "
        else:
            out_g, in_g, tiles = "out_channels", "in_channels", "triton.cdiv(out_channels, "
        src += [
            "    # Narrower channel tiles for few channels (tl.dot needs at least 16).",
            f"    block_n = min({bn}, max(16, triton.next_power_of_2({out_g})))",
            f"    block_k = min({bk}, max(16, triton.next_power_of_2({in_g})))",
            f"    grid = (triton.cdiv({n_pixels}, {bm}) * {tiles}block_n),)",
        ]
        if r.transposed:  # one grid row per phase (output pixels alike modulo the stride), each a 1/prod(stride)
            src[-1] = (f"    grid = (triton.cdiv({' * '.join(['batch', *phase_sizes(r, sp)])}, {bm}) * {tiles}block_n), "
                       f"{math.prod(r.stride)})")
        channels = ["in_group", *sp.in_names, "out_channels", "groups"] if self.grouped else \
            ["in_channels", *sp.in_names, "out_channels"]
        c_in_dim, c_out_dim = (sp.rank + 1, sp.rank) if config.w_kmajor else (sp.rank, sp.rank + 1)
        w_strides = [f"weight_t.stride({i})" for i in (c_in_dim, c_out_dim, *range(sp.rank))]
        args = [("weight_t" if v == wt else v) for v in tensors] + [f"out_{o}" for o in self.group.outputs]
        args += ["batch", *channels, *sp.out_names, f"*{x}.stride()", ", ".join(w_strides)]
        args += [f"*{v}.stride()" for v in strided]
        big = f"max({x}.numel(), math.prod(shape)) >= 2**31"
        taps = ", ".join(f"{k}={n}" for k, n in zip(sp.tap_sizes, sp.kernel_names))
        src.append(f"    {kernel}[grid]({', '.join(args)}, {taps}, BLOCK_M={bm}, BLOCK_N=block_n, "
                   f"BLOCK_K=block_k, IDX64={big}, num_warps={config.num_warps}, "
                   f"num_stages={config.num_stages})")
        src.append(f"    return ({', '.join(f'out_{o}' for o in self.group.outputs)},)")
        return src

    # -- variant (c): implicit GEMM fed by the tensor-memory accelerator (stride 1, one group, half types) --------
    def tma_gemm(self) -> Rendered:
        """A stride-1 convolution as an implicit GEMM whose A tiles are boxes of the channels-last input, one per
        filter tap and channel block, fetched by TMA: output pixels (BH rows x BW columns of one image, one
        position along any outer spatial dimension) shifted by the tap's offset are a box of the input, and the
        hardware zero-fills what falls outside it — the padding, with no masks in the K loop. B is the filter as
        [taps x C_in, C_out], C_in padded to 16 bytes with zeros."""
        r, ident, sp, config = self.roles, self.ident, self.spatial, self.config
        if r.transposed or self.grouped or any(s != 1 for s in r.stride) or config.precision != "half":
            raise ValueError("conv config variant='tma': for stride-1, ungrouped, half-precision convolutions "
                             "only; use variant='implicit_gemm'")
        kernel = f"{ident}_kernel"
        strided = self._strided()
        tensors = list(dict.fromkeys([*self.channel_params, *self.operands]))
        params = ["x_desc", "w_desc", *(f"in_{v}" for v in tensors), *(f"out_{o}" for o in self.group.outputs)]
        params += ["n_img", "c_pad", "c_out", *sp.out_sizes]
        for v in strided:
            params += [f"stride_{v}_{d}" for d in range(len(self.shape))]
        params += [f"{k}: tl.constexpr" for k in sp.tap_sizes]
        params += ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr", "BH: tl.constexpr",
                   "BW: tl.constexpr", "IDX64: tl.constexpr"]
        outer = sp.coords[:-2] if sp.rank > 2 else []  # positions one a box (3-D: depth)
        rows = sp.coords[-2] if sp.rank >= 2 else None
        col = sp.coords[-1]
        o_rows = sp.out_sizes[-2] if sp.rank >= 2 else None
        o_col = sp.out_sizes[-1]
        body = [
            "pid = tl.program_id(0)",
            "n_tiles_n = tl.cdiv(c_out, BLOCK_N)",
            "pid_m = pid // n_tiles_n  # neighbouring programs share the input boxes (channel tiles vary fastest)",
            "pid_n = pid % n_tiles_n",
            f"tiles_w = tl.cdiv({o_col}, BW)",
        ]
        count = ["tiles_w"]
        if rows:
            body.append(f"tiles_h = tl.cdiv({o_rows}, BH)")
            count.insert(0, "tiles_h")
        # pid_m over (image, *outer positions, row block, column block), row-major.
        names = ["img", *(f"{c}_at" for c in outer), *(["row_blk"] if rows else []), "col_blk"]
        sizes = ["n_img", *sp.out_sizes[:len(outer)], *count]
        body += unflatten("pid_m", names, sizes)
        body += [f"{c}0 = {c}_at" for c in outer]
        body += [f"{rows}0 = row_blk * BH" if rows else "", f"{col}0 = col_blk * BW"]
        body = [line for line in body if line]
        tap_lines = unflatten("tap", sp.taps, sp.tap_sizes)
        coords = ["img"]
        for c, k, p, d in zip(sp.coords, sp.taps, r.padding, r.dilation):
            coords.append(f"{c}0 + {base.affine(k, d, -p)}")
        body += [
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "c_blocks = tl.cdiv(c_pad, BLOCK_K)",
            f"# K = ({', '.join(sp.taps)}, input channel): a box of the input a tap and channel block; a block",
            "# reaching past c_pad reads zeros from A (outside the descriptor), so B's rows there never count.",
            f"for step in range(0, {' * '.join(sp.tap_sizes)} * c_blocks):",
            "    tap = step // c_blocks",
            "    c0 = (step % c_blocks) * BLOCK_K",
            *(f"    {line}" for line in tap_lines),
            f"    a = x_desc.load([{', '.join(coords)}, c0]).reshape(BLOCK_M, BLOCK_K)",
            "    b = w_desc.load([tap * c_pad + c0, pid_n * BLOCK_N])",
            "    acc = tl.dot(a, b, acc)",
            "offs_m = tl.arange(0, BLOCK_M)",
            "offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channels",
            *(f"{c} = {c}0 + tl.zeros((BLOCK_M,), dtype=tl.int32)  # one position a tile" for c in outer),
            *([f"{rows} = {rows}0 + offs_m // BW"] if rows else []),
            f"{col} = {col}0 + offs_m % BW",
            "m_mask = " + " & ".join(f"({c} < {n})" for c, n in zip([*([rows] if rows else []), col],
                                                                  [*([o_rows] if rows else []), o_col])),
            "n_mask = offs_n < c_out",
            f"n_pix = {' * '.join(sp.out_sizes)}",
            "if IDX64:",
            "    n_pix = n_pix.to(tl.int64)  # so that every offset below is computed in 64 bits",
            "pix = " + " + ".join(f"{c}" + "".join(f" * {n}" for n in sp.out_sizes[i + 1:])
                                 for i, c in enumerate(sp.coords)),
            f"dst = (img * c_out * n_pix + pix)[:, None] + (offs_n * n_pix)[None, :]  # {sp.layout} output offsets",
            "dst_mask = m_mask[:, None] & n_mask[None, :]",
        ]
        body += self._tile_epilogue(image="img", channels="offs_n", rows="m_mask", cols="n_mask", mask="dst_mask",
                                    flat="dst")
        src = self._head(kernel, params, body, "an implicit-GEMM convolution, its A boxes of the channels-last "
                         "input fetched by TMA a filter tap at a time (zero-filled padding), the epilogue applied to "
                         "the accumulator.", "one Triton kernel, implicit GEMM on TMA loads.")
        src += self._tma_launch(kernel, tensors, strided)
        return Rendered(source="\n".join(src), launcher=ident, notes=("implicit-GEMM convolution, TMA loads",))

    def _tma_launch(self, kernel: str, tensors: Sequence[str], strided: Sequence[str]) -> list[str]:
        r, config, sp = self.roles, self.config, self.spatial
        x, wt = r.x, r.weight
        bm, bn, bk = config.BLOCK_M, config.BLOCK_N, config.BLOCK_K
        dims = ", ".join(map(str, [0, *sp.dims(), 1]))  # NC* -> N*C
        taps = " * ".join(sp.kernel_names)
        w_order = ", ".join(map(str, [*sp.dims(), 1, 0]))
        outer_ones = "1, " * (sp.rank - 2) if sp.rank > 2 else ""
        box = f"[1, {outer_ones}bh, bw, block_k]" if sp.rank >= 2 else "[1, bw, block_k]"
        src = [
            "    from triton.tools.tensor_descriptor import TensorDescriptor",
            f"    step = 16 // {x}.element_size()",
            "    c_pad = -(-in_channels // step) * step  # a descriptor's strides must be 16-byte multiples",
            f"    x_cl = torch.empty((batch, {', '.join(sp.in_names)}, c_pad), dtype={x}.dtype, device={x}.device)",
            f"    x_cl[..., :in_channels].copy_({x}.permute({dims}))  # channels-last; the pad is never read",
            "    n_pad = -(-out_channels // step) * step",
            f"    w_rows = torch.zeros(({taps}, c_pad, n_pad), dtype={wt}.dtype, device={wt}.device)",
            f"    w_rows[:, :in_channels, :out_channels].copy_({wt}.permute({w_order}).reshape({taps}, in_channels, "
            "out_channels))",
            "    # Narrower tiles for few channels (tl.dot needs at least 16); BW output columns a box row.",
            f"    block_n = min({bn}, max(16, triton.next_power_of_2(out_channels)))",
            f"    block_k = min({bk}, max(16, triton.next_power_of_2(c_pad)))",
            f"    bw = min({bm}, max(8, triton.next_power_of_2(out_w)))" if sp.rank >= 2 else f"    bw = {bm}",
            f"    bh = {bm} // bw",
            f"    x_desc = TensorDescriptor.from_tensor(x_cl[..., :in_channels], {box})",
            f"    w_desc = TensorDescriptor.from_tensor(w_rows.view({taps} * c_pad, n_pad)[:, :out_channels], "
            "[block_k, block_n])",
        ]
        src += base.operand_layout_lines(self.operands, self.modes)
        src += self._allocate()
        blocks = ["batch", *sp.out_names[:-2]] if sp.rank > 2 else ["batch"]
        if sp.rank >= 2:
            blocks.append(f"triton.cdiv({sp.out_names[-2]}, bh)")
        blocks.append(f"triton.cdiv({sp.out_names[-1]}, bw)")
        src.append(f"    grid = ({' * '.join(blocks)} * triton.cdiv(out_channels, block_n),)")
        args = ["x_desc", "w_desc", *tensors, *(f"out_{o}" for o in self.group.outputs), "batch", "c_pad",
                "out_channels", *sp.out_names]
        args += [f"*{v}.stride()" for v in strided]
        big = "math.prod(shape) >= 2**31"
        tap_args = ", ".join(f"{k}={n}" for k, n in zip(sp.tap_sizes, sp.kernel_names))
        src.append(f"    {kernel}[grid]({', '.join(args)}, {tap_args}, BLOCK_M={bm}, BLOCK_N=block_n, "
                   f"BLOCK_K=block_k, BH=bh, BW=bw, IDX64={big}, num_warps={config.num_warps}, "
                   f"num_stages={config.num_stages})")
        src.append(f"    return ({', '.join(f'out_{o}' for o in self.group.outputs)},)")
        return src


@dataclass(frozen=True)
class _Indexing:
    """How the epilogue reads operands in one kernel: per-channel parameters, and other tensors by index."""

    channel_load: str  # format string with {v}
    dims: dict[int, str]  # output dimension -> index expression
    vector_dims: tuple[int, ...]  # dimensions whose index varies inside the program
    flat: str  # the offset of a contiguous tensor of the output's shape
    masks: dict[str, str]

    def channel(self, v: str) -> str:
        return self.channel_load.format(v=v)

    def load(self, v: str, mode: str, live: Sequence[int]) -> str:
        if mode == "scalar":
            return f"tl.load(in_{v})"
        if mode == "flat":
            return f"tl.load(in_{v} + {self.flat}, mask={self.masks['all']}, other=0)"
        offset = " + ".join(f"{self.dims[d]} * stride_{v}_{d}" for d in live) or "0"
        varying = [d for d in live if d in self.vector_dims]
        if not varying:  # an address per program: a scalar load
            return f"tl.load(in_{v} + {offset})"
        if "rows" in self.masks:  # the 2-D tile of the implicit GEMM: rows are pixels, columns channels
            pixels, channels = any(d != 1 for d in varying), 1 in varying
            mask = self.masks["all"] if pixels and channels else self.masks["rows" if pixels else "cols"]
        else:
            mask = self.masks["vector"]
        return f"tl.load(in_{v} + ({offset}), mask={mask}, other=0)"
