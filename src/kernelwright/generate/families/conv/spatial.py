"""The names a convolution's kernels and launchers give its spatial dimensions, for rank 1, 2 or 3, the index
arithmetic written over them, and the (pixels x channels) tiles and channels-last copy the variants share. A 2-D convolution's names are those of the first (2-D only) templates — ``h``/``w``,
``oh``/``ow``, ``orow``/``ocol``, ``kh``/``kw`` — so its source is unchanged; a 1-D convolution (NCL) is named as a
single row (``w``), a 3-D one (NCDHW) adds a depth ``d`` in front."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_LETTERS = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}
_WORDS = {"d": "dep", "h": "row", "w": "col"}  # a coordinate along the dimension
_SIZES = {"d": "depth", "h": "height", "w": "width"}  # a size, in the library variant's epilogue kernel
_LAYOUTS = {1: "NCL", 2: "NCHW", 3: "NCDHW"}


def unflatten(flat: str, names: Sequence[str], sizes: Sequence[str]) -> list[str]:
    """Lines ``name = <expr>`` that split the row-major flat index ``flat`` over ``sizes`` (the first size is never
    needed: ``flat`` is in range)."""
    lines = []
    for i, name in enumerate(names):
        after = sizes[i + 1:]
        text = flat
        if after:
            text += f" // {after[0]}" if len(after) == 1 else f" // ({' * '.join(after)})"
        if i > 0:
            text += f" % {sizes[i]}"
        lines.append(f"{name} = {text}")
    return lines


@dataclass(frozen=True)
class Spatial:
    """Names for the spatial dimensions of a rank-``rank`` convolution, outermost first."""

    rank: int

    @property
    def letters(self) -> tuple[str, ...]:
        return _LETTERS[self.rank]

    @property
    def layout(self) -> str:
        return _LAYOUTS[self.rank]

    def names(self, pattern: str) -> list[str]:
        """``pattern`` for each dimension, outermost first: ``{c}`` its letter, ``{C}`` the letter upper-case,
        ``{word}`` a coordinate's name along it (``row``), ``{size}`` its size's (``height``)."""
        return [pattern.format(c=c, C=c.upper(), word=_WORDS[c], size=_SIZES[c]) for c in self.letters]

    # The implicit-GEMM kernel's names: input sizes, output sizes, an output pixel's coordinates, the input
    # coordinates a tap reads, a filter tap's coordinates and the filter's (constexpr) sizes, the strides.
    sizes = property(lambda self: self.names("{c}"))
    out_sizes = property(lambda self: self.names("o{c}"))
    coords = property(lambda self: self.names("o{word}"))
    in_coords = property(lambda self: self.names("in_{word}"))
    taps = property(lambda self: self.names("k{c}"))
    tap_sizes = property(lambda self: self.names("K{C}"))
    x_strides = property(lambda self: self.names("sx_{c}"))
    w_strides = property(lambda self: self.names("sw_{c}"))
    # The launchers' names: input, filter and output sizes.
    in_names = property(lambda self: self.names("in_{c}"))
    kernel_names = property(lambda self: self.names("k_{c}"))
    out_names = property(lambda self: self.names("out_{c}"))
    # The library variant's epilogue kernel: a pixel's coordinates in its plane, the plane's sizes.
    plane_coords = property(lambda self: self.names("{word}"))
    plane_sizes = property(lambda self: self.names("{size}"))

    def dims(self) -> range:
        """The output's spatial dimensions (after image and channel)."""
        return range(2, 2 + self.rank)


def gemm_k_loop(sp: Spatial, x: str, weight: str, *, grouped: bool, dot: str, count: str, comment: Sequence[str],
                tap_lines: Sequence[str]) -> list[str]:
    """The implicit GEMM's K loop, direct or transposed: ``count`` taps (``tap_lines`` set the tap's filter
    coordinates and the input coordinates it reads) times the (group's) input channels ``BLOCK_K`` at a time, one
    flat loop so the compiler pipelines every step; the patch gathered with masks for padding and range."""
    c_in = "c_in_g" if grouped else "c_in"
    if grouped:
        lines = ["img_start = img * sx_n + grp * c_in_g * sx_c  # the image's first channel of the group"]
    else:
        lines = ["img_start = img * sx_n"]
    inside = " & ".join(f"({c} >= 0) & ({c} < {n})" for c, n in zip(sp.in_coords, sp.sizes))
    patch = " + ".join(f"{c} * {st}" for c, st in zip(sp.in_coords, sp.x_strides))
    taps = " + ".join(f"{k} * {st}" for k, st in zip(sp.taps, sp.w_strides))
    lines += [
        "offs_k = tl.arange(0, BLOCK_K)",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        f"c_blocks = tl.cdiv({c_in}, BLOCK_K)",
        *comment,
        f"for step in range(0, {count} * c_blocks):",
        "    tap = step // c_blocks",
        "    c0 = (step % c_blocks) * BLOCK_K",
        *(f"    {line}" for line in tap_lines),
        f"    inside = m_mask & {inside}",
        "    chans = c0 + offs_k",
        f"    c_mask = chans < {c_in}",
        f"    a = tl.load(in_{x} + (img_start + {patch})[:, None] + chans[None, :] * sx_c,",
        "                mask=inside[:, None] & c_mask[None, :], other=0)",
        f"    b = tl.load(in_{weight} + ({taps}) + chans[:, None] * sw_c + offs_n[None, :] * sw_o,",
        "                mask=c_mask[:, None] & n_mask[None, :], other=0)",
        f"    {dot}",
    ]
    return lines


def pixel_channel_tile() -> list[str]:
    """A program's BLOCK_P pixels x BLOCK_C channels of one image (``n_pix`` pixels, ``n_channels`` channels) on a
    1-D grid, pixel blocks fastest, then channel blocks, then images (a grid axis 1 of pixel blocks would stop at
    65,535 of them: a 2048 x 2048 output in 64-pixel tiles)."""
    return [
        "pid = tl.program_id(0)",
        "n_blocks_p = tl.cdiv(n_pix, BLOCK_P)",
        "n_blocks_c = tl.cdiv(n_channels, BLOCK_C)",
        "image = pid // (n_blocks_p * n_blocks_c)",
        "channel = (pid // n_blocks_p % n_blocks_c) * BLOCK_C + tl.arange(0, BLOCK_C)",
        "pixels = (pid % n_blocks_p) * BLOCK_P + tl.arange(0, BLOCK_P)",
        "if IDX64:",
        "    image = image.to(tl.int64)",
        "    channel = channel.to(tl.int64)",
    ]


def channels_last_copy(name: str) -> list[str]:
    """A kernel and its launcher: the channels-last copy of a contiguous (N, C, *spatial) tensor, tiles of
    64 pixels x 64 channels of one image, loaded along the pixels and stored along the channels (Triton turns
    the tile round through shared memory). Tile and warps are a lead, not yet swept."""
    return [
        "@triton.jit",
        f"def {name}_kernel(in_x, out_x, n_channels, n_pix, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,",
        "        IDX64: tl.constexpr):",
        '    """The channels-last copy of a convolution\'s input: (image, channel, pixel) -> (image, pixel, '
        'channel)."""',
        *(f"    {line}" for line in pixel_channel_tile()),
        "    mask = (pixels < n_pix)[:, None] & (channel < n_channels)[None, :]",
        "    tile = tl.load(in_x + (image * n_channels + channel)[None, :] * n_pix + pixels[:, None], mask=mask)",
        "    tl.store(out_x + (image * n_pix + pixels)[:, None] * n_channels + channel[None, :], tile, mask=mask)",
        "",
        "",
        f"def {name}(x, layout):",
        '    """x (contiguous) copied channels-last by the kernel above."""',
        "    out = torch.empty_like(x, memory_format=layout)",
        "    n_pix = math.prod(x.shape[2:])",
        "    if out.numel():",
        "        block_p = min(64, max(triton.next_power_of_2(n_pix), 16))",
        "        block_c = min(64, triton.next_power_of_2(x.shape[1]))",
        f"        {name}_kernel[(x.shape[0] * triton.cdiv(x.shape[1], block_c) * triton.cdiv(n_pix, block_p),)](",
        "            x, out, x.shape[1], n_pix, BLOCK_P=block_p, BLOCK_C=block_c, IDX64=x.numel() >= 2**31, "
        "num_warps=4)",
        "    return out",
    ]
