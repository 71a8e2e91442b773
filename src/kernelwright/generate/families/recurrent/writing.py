"""The source of a recurrent group: the input-projection GEMM, the time scan of one layer and direction, and the
launcher that walks the layers with sizes read from the tensors at run time."""

from __future__ import annotations

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.base import SM_COUNT_SOURCE, Group, Rendered
from kernelwright.generate.families.recurrent.config import RecurrentConfig
from kernelwright.generate.families.recurrent.matching import Recurrent
from kernelwright.generate.graph import ProblemGraph

_PROJ = '''\
@triton.jit
def {ident}_proj_kernel(x_ptr, w_ptr, b_ptr, out_ptr, T, B, I, G, sxt, sxb, sxk, swg, swk,
                        HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    """out[t * B + b, g] = x[t, b, :] . w[g, :] (+ bias[g]) for every time step at once, fp32."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mask_m = rm < T * B
    mask_n = rn < G
    rows = (rm // B).to(tl.int64) * sxt + (rm % B).to(tl.int64) * sxb
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rows[:, None] + kk[None, :].to(tl.int64) * sxk,
                    mask=mask_m[:, None] & (kk[None, :] < I), other=0.0)
        w = tl.load(w_ptr + rn[None, :].to(tl.int64) * swg + kk[:, None].to(tl.int64) * swk,
                    mask=mask_n[None, :] & (kk[:, None] < I), other=0.0)
        acc = tl.dot(a, w, acc=acc{precision})
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=mask_n, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + rm[:, None].to(tl.int64) * G + rn[None, :], acc, mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def {ident}_tanh(x):
    return {tanh}
'''

# The cell, per kind: lines after the K loop, with pre_q = the projection's gate q (b_ih in it) and acc_q = the
# hidden state's dot with W_hh's gate q; PyTorch's gate order and formulas (torch.nn.LSTM / GRU / RNN docs).
_CELLS = {
    "lstm": [
        "i_g = tl.sigmoid(pre_0 + acc_0 + bh_0)",
        "f_g = tl.sigmoid(pre_1 + acc_1 + bh_1)",
        "g_g = {ident}_tanh(pre_2 + acc_2 + bh_2)",
        "o_g = tl.sigmoid(pre_3 + acc_3 + bh_3)",
        "c_ptrs = c_ptr + rb[:, None].to(tl.int64) * H + rj[None, :]",
        "c_new = f_g * tl.load(c_ptrs, mask=mask, other=0.0) + i_g * g_g",
        "tl.store(c_ptrs, c_new, mask=mask)",
        "h_new = o_g * {ident}_tanh(c_new)",
    ],
    "gru": [
        "r_g = tl.sigmoid(pre_0 + acc_0 + bh_0)",
        "z_g = tl.sigmoid(pre_1 + acc_1 + bh_1)",
        "n_g = {ident}_tanh(pre_2 + r_g * (acc_2 + bh_2))",
        "h_old = tl.load(h_cur + rb[:, None].to(tl.int64) * H + rj[None, :], mask=mask, other=0.0,",
        '                cache_modifier=".cg")',
        "h_new = (1.0 - z_g) * n_g + z_g * h_old",
    ],
    "tanh": ["h_new = {ident}_tanh(pre_0 + acc_0 + bh_0)"],
    "relu": ["h_new = tl.maximum(pre_0 + acc_0 + bh_0, 0.0)"],
}


def write(graph: ProblemGraph, group: Group, config: RecurrentConfig, ident: str) -> Rendered:
    rnn: Recurrent = group.detail["rnn"]
    dtype = graph.info(rnn.x).dtype
    precision = ', input_precision="ieee"' if dtype == torch.float32 else ""
    source = _PROJ.format(ident=ident, precision=precision, tanh=expr._tanh("x"))
    # The scan's dot is of fp32 states: IEEE always (TF32 would round the state every step).
    source += "\n\n" + _scan_kernel(rnn, ident, ', input_precision="ieee"')
    source += "\n\n" + SM_COUNT_SOURCE.format(ident=ident) + "\n\n\n" + _NSPLIT.format(ident=ident)
    source += "\n\n" + _launcher(graph, group, rnn, config, ident)
    directions = "bidirectional " if rnn.directions == 2 else ""
    notes = (f"{rnn.node}: {rnn.layers}-layer {directions}{rnn.cell} as a scan over time, "
             f"{config.BLOCK_B} batch rows a program",)
    return Rendered(source=source, launcher=ident, notes=notes)


# The largest hidden size whose W_hh block (gates x BLOCK_H x H fp32) is kept in registers: 4 x 16 x 512 floats
# over 8 warps is 128 a thread.
_RESIDENT_MAX_H = 512


def _scan_kernel(rnn: Recurrent, ident: str, precision: str) -> str:
    q = range(rnn.gates)
    lines = [
        '@triton.jit(do_not_specialize=["NSPLIT"])  # 1 on the CPU: the barrier compiled all the same',
        f"def {ident}_scan_kernel(proj_ptr, whh_ptr, bhh_ptr, h_ptr, c_ptr, out_ptr, bar_ptr, T, B, H, sot, sob,",
        "                         swd, swg, swk, sbd, NSPLIT, HAS_BIAS: tl.constexpr,",
        "                         BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,",
        "                         RESIDENT: tl.constexpr, KFULL: tl.constexpr):",
        '    """One layer over every time step: program (i, j, d) owns batch rows [i * BLOCK_B, ...) of direction d',
        "    (1: reversed time) and hidden blocks j, j + NSPLIT, ... of them. h_ptr holds each direction's state",
        "    twice (step s reads slot s % 2, writes the other), c_ptr the LSTM's cell state (updated in place by its",
        "    owner); each step's hidden state also goes to out[t, b, d * H + j]. With NSPLIT > 1 the NSPLIT programs",
        "    of a batch block and direction meet at a barrier after every step (a counter in bar_ptr): the launcher",
        "    makes NSPLIT > 1 only where every program of the grid is resident at once (one an SM at most).",
        "    RESIDENT: the program owns one hidden block (NSPLIT * BLOCK_H >= H), whose W_hh rows of every gate",
        '    (KFULL >= H columns) it loads once and keeps in registers for all the steps."""',
        "    pid_b = tl.program_id(0)",
        "    d = tl.program_id(2)",
        "    rb = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)",
        "    mask_b = rb < B",
        f"    G = {rnn.gates} * H",
        "    whh = whh_ptr + d.to(tl.int64) * swd",
        "    bhh = bhh_ptr + d.to(tl.int64) * sbd",
        "    proj = proj_ptr + d.to(tl.int64) * T * B * G",
        "    h_dir = h_ptr + d.to(tl.int64) * 2 * B * H",
        "    c_ptr += d.to(tl.int64) * B * H",
        "    bar = bar_ptr + d * tl.num_programs(0) + pid_b",
        "    col0 = d * H",
        "    if RESIDENT:",
        "        rj = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)",
        "        rk = tl.arange(0, KFULL)",
        "        w_mask = (rj[None, :] < H) & (rk[:, None] < H)",
        *(f"        w_{g} = tl.load(whh + ({g} * H + rj[None, :]).to(tl.int64) * swg + rk[:, None].to(tl.int64) * swk,"
          f"\n                      mask=w_mask, other=0.0).to(tl.float32)" for g in q),
        "    for s in range(T):",
        "        t = s + d * (T - 1 - 2 * s)  # direction 1 walks time backwards",
        "        h_cur = h_dir + (s % 2) * B * H",
        "        h_nxt = h_dir + ((s + 1) % 2) * B * H",
        "        for j0 in range(tl.program_id(1) * BLOCK_H, H, NSPLIT * BLOCK_H):",
        "            rj = j0 + tl.arange(0, BLOCK_H)",
        "            mask_j = rj < H",
        "            mask = mask_b[:, None] & mask_j[None, :]",
        "            # The previous state: written by other programs of this step's barrier, so read from L2, not a",
        "            # stale L1 line.",
        "            if RESIDENT:",
        "                h = tl.load(h_cur + rb[:, None].to(tl.int64) * H + rk[None, :],",
        '                            mask=mask_b[:, None] & (rk[None, :] < H), other=0.0, cache_modifier=".cg")',
        *(f"                acc_{g} = tl.dot(h, w_{g}{precision})" for g in q),
        "            else:",
        *(f"                acc_{g} = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)" for g in q),
        "                for k0 in range(0, H, BLOCK_K):",
        "                    rk = k0 + tl.arange(0, BLOCK_K)",
        "                    mask_k = rk < H",
        "                    h = tl.load(h_cur + rb[:, None].to(tl.int64) * H + rk[None, :],",
        '                                mask=mask_b[:, None] & mask_k[None, :], other=0.0, cache_modifier=".cg")',
    ]
    for g in q:
        lines += [f"                    w = tl.load(whh + ({g} * H + rj[None, :]).to(tl.int64) * swg "
                  "+ rk[:, None].to(tl.int64) * swk,",
                  "                                mask=mask_j[None, :] & mask_k[:, None], other=0.0).to(tl.float32)",
                  f"                    acc_{g} = tl.dot(h, w, acc=acc_{g}{precision})"]
    lines.append("            row = (t * B + rb[:, None]).to(tl.int64) * G + rj[None, :]")
    for g in q:
        lines += [f"            pre_{g} = tl.load(proj + row + {g} * H, mask=mask, other=0.0)",
                  "            if HAS_BIAS:",
                  f"                bh_{g} = tl.load(bhh + {g} * H + rj, mask=mask_j, other=0.0).to(tl.float32)"
                  "[None, :]",
                  "            else:",
                  f"                bh_{g} = 0.0"]
    lines += [f"            {line.format(ident=ident)}" for line in _CELLS[rnn.cell]]
    lines += [
        "            tl.store(h_nxt + rb[:, None].to(tl.int64) * H + rj[None, :], h_new, mask=mask)",
        "            o_ptrs = out_ptr + t.to(tl.int64) * sot + rb[:, None].to(tl.int64) * sob + col0 + rj[None, :]",
        "            tl.store(o_ptrs, h_new.to(out_ptr.dtype.element_ty), mask=mask)",
        "        # The next step reads what every thread of this program (and, split, of its peers) wrote in this one.",
        "        tl.debug_barrier()",
        "        if NSPLIT > 1:",
        '            tl.atomic_add(bar, 1, sem="release", scope="gpu")',
        "            target = (s + 1) * NSPLIT",
        '            seen = tl.atomic_add(bar, 0, sem="acquire", scope="gpu")',
        "            while seen < target:",
        '                seen = tl.atomic_add(bar, 0, sem="acquire", scope="gpu")',
        "            tl.debug_barrier()",
    ]
    return "\n".join(lines)


_NSPLIT = '''\
def {ident}_nsplit(device, blocks_h, programs):
    """Programs to share a batch block's hidden units: as many as its hidden blocks, while the whole grid (they
    wait for each other every step) fits one program an SM. 1 on the CPU, whose interpreter runs programs one
    after another."""
    if device.type != "cuda":
        return 1
    return max(1, min(blocks_h, {ident}_sm_count(device, 1) // programs))
'''


def _state(rnn: Recurrent, name: str | None) -> str:
    """An initial state: the group input, or the zeros (fill) export wrote where the forward gave none."""
    value = rnn.fill(name)
    if value is None:
        return str(name)
    return (f"torch.full(({rnn.layers * rnn.directions}, B, H), {value!r}, dtype=x_in.dtype, "
            "device=x_in.device)")


def _launcher(graph: ProblemGraph, group: Group, rnn: Recurrent, config: RecurrentConfig, ident: str) -> str:
    bb, bh, bk, warps = config.BLOCK_B, config.BLOCK_H, config.BLOCK_K, config.num_warps
    split, resident = bool(config.split), bool(config.resident)
    lstm = rnn.cell == "lstm"
    params = "[" + ", ".join(rnn.params) + "]"
    per = 4 if rnn.has_biases else 2
    wanted = dict(rnn.items)
    returns = []
    for name in group.outputs:
        index = next(i for i, n in rnn.items if n == name)
        returns.append(("out", "h_n", "c_n")[index])
    ops = ", ".join(graph.node(n).op for n in group.nodes)
    lines = [
        f"def {ident}({', '.join(group.inputs)}):",
        f'    """{ops}: {rnn.layers} layer(s), {rnn.directions} direction(s), {rnn.cell} cell; sizes from the',
        '    tensors. Per layer and direction: the input projection of every step at once, then the time scan."""',
        f"    x_in = {rnn.x}",
        f"    params = {params}",
        f"    T, B = (x_in.shape[1], x_in.shape[0]) if {rnn.batch_first} else (x_in.shape[0], x_in.shape[1])",
        "    H = params[1].shape[1]  # W_hh: [gates * H, H]",
        f"    h_0 = {_state(rnn, rnn.h0)}",
        *([f"    c_0 = {_state(rnn, rnn.c0)}"] if lstm else []),
        f"    G = {rnn.gates} * H",
        f"    D = {rnn.directions}",
        "    dev = x_in.device",
        "    proj = torch.empty((D, T * B, G), dtype=torch.float32, device=dev)",
        "    state = torch.empty((D, 2, B, H), dtype=torch.float32, device=dev)",
        "    cell = torch.empty((D, B, H), dtype=torch.float32, device=dev)" if lstm else "    cell = state",
        "    h_n = torch.empty_like(h_0)",
        *(["    c_n = torch.empty_like(c_0)"] if lstm and 2 in wanted else []),
        f"    blocks = triton.cdiv(B, {bb})",
        f"    nsplit = {ident}_nsplit(dev, triton.cdiv(H, {bh}), blocks * D) if {split} else 1",
        "    # W_hh's block kept in registers where a program owns one hidden block (and H fits in one dot).",
        f"    resident = {resident} and nsplit * {bh} >= H and H <= {_RESIDENT_MAX_H}",
        "    layer_in = x_in",
        f"    for layer in range({rnn.layers}):",
        f"        shape = (B, T, D * H) if {rnn.batch_first} else (T, B, D * H)",
        "        out = torch.empty(shape, dtype=x_in.dtype, device=dev)",
        f"        sot, sob = (out.stride(1), out.stride(0)) if {rnn.batch_first} else (out.stride(0), out.stride(1))",
        f"        sxt, sxb = ((layer_in.stride(1), layer_in.stride(0)) if {rnn.batch_first}",
        "                    else (layer_in.stride(0), layer_in.stride(1)))",
        "        I = layer_in.shape[-1]",
        "        w_hh, b_hh = [], []",
        "        for d in range(D):",
        "            index = layer * D + d",
        f"            w_ih, w = params[index * {per}], params[index * {per} + 1]",
        *([f"            b_ih, b = params[index * {per} + 2], params[index * {per} + 3]"] if rnn.has_biases
          else ["            b_ih = b = w_ih  # not read (HAS_BIAS=False)"]),
        "            w_hh.append(w)",
        "            b_hh.append(b)",
        "            grid = (triton.cdiv(T * B, 64), triton.cdiv(G, 64))",
        f"            {ident}_proj_kernel[grid](layer_in, w_ih, b_ih, proj[d], T, B, I, G, sxt, sxb,",
        "                                      layer_in.stride(2), w_ih.stride(0), w_ih.stride(1),",
        f"                                      HAS_BIAS={rnn.has_biases}, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,"
        " num_warps=4)",
        "        # Both directions in one launch: their recurrent weights side by side (a copy of 2 x G x H).",
        "        w_hh = torch.stack(w_hh) if D > 1 else w_hh[0].unsqueeze(0)",
        "        b_hh = torch.stack(b_hh) if D > 1 else b_hh[0].unsqueeze(0)",
        "        state[:, 0].copy_(h_0[layer * D:(layer + 1) * D])",
        *(["        cell.copy_(c_0[layer * D:(layer + 1) * D])"] if lstm else []),
        "        bar = torch.zeros((D * blocks,), dtype=torch.int32, device=dev)",
        f"        {ident}_scan_kernel[(blocks, nsplit, D)](",
        "            proj, w_hh, b_hh, state, cell, out, bar, T, B, H, sot, sob,",
        "            w_hh.stride(0), w_hh.stride(1), w_hh.stride(2), b_hh.stride(0), nsplit,",
        f"            HAS_BIAS={rnn.has_biases}, BLOCK_B={bb}, BLOCK_H={bh}, BLOCK_K={bk}, RESIDENT=resident,",
        f"            KFULL=max(16, triton.next_power_of_2(H)), num_warps={warps})",
        "        h_n[layer * D:(layer + 1) * D].copy_(state[:, T % 2])",
        *(["        c_n[layer * D:(layer + 1) * D].copy_(cell)"] if lstm and 2 in wanted else []),
        "        layer_in = out",
        f"    return ({', '.join(returns)},)",
    ]
    return "\n".join(lines)
