"""The names a convolution's kernels and launchers give its spatial dimensions, for rank 1, 2 or 3, and the index
arithmetic written over them. A 2-D convolution's names are those of the first (2-D only) templates — ``h``/``w``,
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

