"""The implicit-GEMM kernel of a transposed convolution, written as a gather by phase.

A transposed convolution scatters each input pixel over ``taps`` output pixels; read the other way, output pixel
``o`` (along one dimension) gathers input ``i = (o + padding - k * dilation) / stride`` for every tap ``k`` that
makes the division exact. Which taps those are depends only on ``o mod stride``, its *phase*: the output is split
into ``prod(stride)`` phases (the grid's second axis), every pixel of a program's tile shares one, and the K loop
walks only that phase's taps — ``k = k0 + t * step`` with ``step = stride / gcd(stride, dilation)`` — so no tap is
loaded to be masked away (a stride-2 3-D convolution would otherwise load 8 taps for every one it uses). Along a
dimension, an in-phase pixel ``j`` (``o = phase + stride * j``) reads ``i = j + base - t * (dilation / g)`` with
``base = (phase + padding - k0 * dilation) / stride``, exact by the choice of ``k0``: no division in the loop.

The filter (``[C_in, C_out / groups, *taps]``) is permuted once by the launcher into the direct convolution's
B layout (``[*taps, C_in / groups, C_out]``), so the loads of B and the epilogue are the direct kernel's.
"""

from __future__ import annotations

import math

from kernelwright.generate.families.base import affine
from kernelwright.generate.families.conv.matching import Roles
from kernelwright.generate.families.conv.spatial import Spatial, gemm_k_loop, unflatten


def _steps(r: Roles) -> list[int]:
    """Per dimension, the distance between two taps of one phase."""
    return [s // math.gcd(s, d) for s, d in zip(r.stride, r.dilation)]


def phase_sizes(r: Roles, sp: Spatial) -> list[str]:
    """The launcher's expressions for one phase's output sizes (the largest phase's: the first)."""
    return [out if s == 1 else f"triton.cdiv({out}, {s})" for out, s in zip(sp.out_names, r.stride)]


def transposed_weight_line(r: Roles, sp: Spatial, *, kmajor: bool = False) -> str:
    """The launcher's line that lays the filter out as the direct kernel's B: ``[*taps, C_in / groups, C_out]``,
    output channels of one group contiguous (group-major, as the direct convolution numbers them); with ``kmajor``
    (3xTF32) ``[*taps, C_out, C_in / groups]``, the input channels (the K run) contiguous."""
    wt = r.weight
    rank = sp.rank
    taps = ", ".join(sp.kernel_names)
    lead = f"    weight_t = {wt}.reshape(groups, in_group, out_group, *{wt}.shape[2:])"
    if kmajor:
        order = ", ".join(map(str, [*range(3, 3 + rank), 0, 2, 1]))
        return (f"{lead}.permute({order}).reshape({taps}, out_channels, in_group)  # [{', '.join(sp.taps)}, c_out, "
                "c_in]: B K-major")
    order = ", ".join(map(str, [*range(3, 3 + rank), 1, 0, 2]))
    return f"{lead}.permute({order}).reshape({taps}, in_group, out_channels)  # [{', '.join(sp.taps)}, c_in, c_out]"


def transposed_main_loop(r: Roles, sp: Spatial, *, precision: str, grouped: bool, head: list[str]) -> list[str]:
    """The kernel up to the accumulated tile and its output offsets (the names of the direct kernel's
    ``_gemm_main_loop``: ``acc``, ``dst``, ``dst_mask``, an output pixel's coordinates). ``head``: the direct
    kernel's tile lines for ``n_img * n_q`` pixels (``_Renderer._gemm_head(count="n_q")``)."""
    if precision == "half":
        dot = "acc = tl.dot(a, b, acc)"
    else:
        dot = f'acc = tl.dot(a, b, acc, input_precision="{precision}")'
    letters = sp.letters
    phase = [f"ph_{c}" for c in letters]  # this program's phase along each dimension
    q_sizes = [f"q_{c}" for c in letters]  # one phase's output sizes
    js = [f"j_{c}" for c in letters]  # an in-phase pixel's coordinates
    k0s, nks, bases, ts = ([f"{n}_{c}" for c in letters] for n in ("k0", "nk", "base", "t"))
    steps = _steps(r)

    lines = [f"{q} = {o if s == 1 else f'tl.cdiv({o}, {s})'}"
             for q, o, s in zip(q_sizes, sp.out_sizes, r.stride)]
    lines += [f"n_q = {' * '.join(q_sizes)}  # output pixels of one phase (at most)",
              "if IDX64:", "    n_q = n_q.to(tl.int64)"]
    lines += head
    lines += ["phase = tl.program_id(1)  # output pixels alike modulo the stride"]
    lines += unflatten("phase", phase, [str(s) for s in r.stride])
    lines += ["img = offs_m // n_q", "qix = offs_m % n_q"]
    lines += unflatten("qix", js, q_sizes)
    for coord, ph, j, s in zip(sp.coords, phase, js, r.stride):
        lines.append(f"{coord} = {ph} + {affine(j, s)}" if s > 1 else f"{coord} = {j}")
    lines.append("m_mask = m_mask & " + " & ".join(f"({c} < {o})" for c, o in zip(sp.coords, sp.out_sizes)))
    # This phase's taps along each dimension: the first, k0 (found among step candidates), their count, and the
    # input coordinate of the first tap for in-phase pixel 0.
    for ph, k0, nk, base, k_size, s, p, d, step in zip(phase, k0s, nks, bases, sp.tap_sizes, r.stride, r.padding,
                                                       r.dilation, steps):
        if s == 1:
            lines += [f"{k0} = 0", f"{nk} = {k_size}", f"{base} = {p}"]
            continue
        lines += [
            f"{k0} = {step}  # none yet",
            f"for kk in tl.static_range({step}):",
            f"    {k0} = tl.where((({affine(ph, 1, p)} - kk * {d}) % {s} == 0) & ({k0} == {step}), kk, {k0})",
            f"{nk} = tl.where({k0} < {step}, tl.maximum({k_size} - {k0} + {step - 1}, 0) // {step}, 0)",
            f"{base} = ({affine(ph, 1, p)} - {k0} * {d}) // {s}  # exact",
        ]
    tap_lines = unflatten("tap", ts, nks)
    for k, k0, t, step, coord, j, base, s, d in zip(sp.taps, k0s, ts, steps, sp.in_coords, js, bases, r.stride,
                                                    r.dilation):
        tap_lines += [f"{k} = {k0} + {affine(t, step)}", f"{coord} = {j} + {base} - {affine(t, step * d // s)}"]
    lines += gemm_k_loop(sp, r.x, r.weight, grouped=grouped, dot=dot, count=" * ".join(nks), tap_lines=tap_lines,
                         comment=["# K = (this phase's taps, input channel): one flat loop, so the compiler "
                                  "pipelines every step."])
    pix = sp.coords[0]
    for coord, size in zip(sp.coords[1:], sp.out_sizes[1:]):
        pix = f"({pix}) * {size} + {coord}" if "+" in pix else f"{pix} * {size} + {coord}"
    lines += [
        f"pix = {pix}",
        f"dst = (img * c_out * n_pix + pix)[:, None] + (offs_n * n_pix)[None, :]  # {sp.layout} output offsets",
        "dst_mask = m_mask[:, None] & n_mask[None, :]",
    ]
    return lines
