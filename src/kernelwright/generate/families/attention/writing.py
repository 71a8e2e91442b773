"""The source of an attention group: FlashAttention-2's forward pass as two Triton functions — the online-softmax
loop over key blocks (run twice: unmasked blocks, then the masked ones) and the kernel around it — and a launcher
that reads sizes and strides from the tensors."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kernelwright.generate import expr
from kernelwright.generate.families.attention.config import AttentionConfig
from kernelwright.generate.families.base import TMA_READY_SOURCE, Group, Rendered
from kernelwright.generate.graph import ProblemGraph

LOG2E = 1.4426950408889634


def write(graph: ProblemGraph, group: Group, config: AttentionConfig, ident: str) -> Rendered:
    d = group.detail
    qk_dtype, v_dtype = d["qk_dtype"], d["v_dtype"]
    loaded = {name: graph.info(d[name]).dtype for name in ("q", "k", "v")}

    def cast(name: str, target: torch.dtype) -> str:
        return "" if loaded[name] == target else f".to({_tl(target)})"

    tma = config.variant == "tma"
    inner = _inner_function(ident, k_cast=cast("k", qk_dtype), v_cast=cast("v", v_dtype),
                            qk_precision=_precision_arg(qk_dtype, config),
                            pv_precision=_precision_arg(v_dtype, config), p_dtype=_tl(v_dtype), causal=d["causal"],
                            tma=tma)
    kernel = _kernel(ident, group, q_cast=cast("q", qk_dtype), tma=tma)
    ready = [*TMA_READY_SOURCE.format(ident=ident).splitlines(), "", ""] if tma else []
    source = "\n".join([*inner, "", "", *kernel, "", "", *ready, *_launcher(graph, group, config, ident)])
    notes = _notes(group) + (("q, k and v through TMA descriptors",) if tma else ())
    return Rendered(source=source, launcher=ident, notes=notes)


def _tl(dtype: torch.dtype) -> str:
    return expr.TL_DTYPE[dtype]


def _precision_arg(dtype: torch.dtype, config: AttentionConfig) -> str:
    if dtype != torch.float32:
        return ""
    return f', input_precision="{config.input_precision or "ieee"}"'


def _indented(lines: Sequence[str]) -> list[str]:
    return [f"    {line}" if line else "" for line in lines]


def _inner_function(ident: str, *, k_cast: str, v_cast: str, qk_precision: str, pv_precision: str, p_dtype: str,
                    causal: bool, tma: bool = False) -> list[str]:
    """The online softmax over a range of key blocks: the running max ``m_i`` and sum ``l_i`` per row, in base 2.
    ``tma``: K and V blocks come from tensor descriptors (zero-filled past the sequence and the head dims), K's
    block as [BLOCK_N, BLOCK_D], transposed for the dot."""
    causal_keep = " & (cols[None, :] <= offs_m[:, None])" if causal else ""
    body = [
        '"""Online softmax over the key blocks [lo, hi). MASKED: the blocks past the sequence\'s end or on the',
        'causal diagonal, where some keys must be excluded; the others run without a mask."""',
        "offs_n = tl.arange(0, BLOCK_N)",
        "offs_d = tl.arange(0, BLOCK_D)",
        "offs_dv = tl.arange(0, BLOCK_DV)",
        "for start_n in tl.range(lo, hi, BLOCK_N):",
        "    start_n = tl.multiple_of(start_n, BLOCK_N)",
        "    cols = start_n + offs_n",
        "    k_mask = offs_d[:, None] < HEAD_DIM",
        "    v_mask = offs_dv[None, :] < HEAD_DIM_V",
        "    if MASKED:",
        "        k_mask = k_mask & (cols[None, :] < seq_k)",
        "        v_mask = v_mask & (cols[:, None] < seq_k)",
        *(["    # k as [BLOCK_N, BLOCK_D] from its descriptor; rows past seq_k and the padded head dims read 0",
           f"    k = tl.trans(K.load([off_z, off_h, start_n, 0]).reshape(BLOCK_N, BLOCK_D){k_cast})"] if tma else [
          "    # k^T as [BLOCK_D, BLOCK_N]; masked entries read 0 (the padded head dims add nothing to q.k)",
          "    k = tl.load(K + offs_d[:, None] * stride_kd + cols[None, :] * stride_kn, mask=k_mask, other=0.0)"
          f"{k_cast}"]),
        f"    s = tl.dot(q, k{qk_precision}) * qk_scale  # log2(e) * scale * q.k: softmax in base 2",
        "    if MASKED:",
        f"        keep = (cols[None, :] < seq_k){causal_keep}",
        '        s = tl.where(keep, s, float("-inf"))',
        "    m_new = tl.maximum(m_i, tl.max(s, 1))",
        "    # A row that has seen no unmasked key yet keeps max -inf; subtracting 0 then gives p = 0, not NaN.",
        '    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)',
        "    alpha = tl.exp2(m_i - m_ref)",
        "    p = tl.exp2(s - m_ref[:, None])",
        "    l_i = l_i * alpha + tl.sum(p, 1)",
        (f"    v = V.load([off_z, off_h, start_n, 0]).reshape(BLOCK_N, BLOCK_DV){v_cast}" if tma else
         "    v = tl.load(V + cols[:, None] * stride_vn + offs_dv[None, :] * stride_vd, mask=v_mask, other=0.0)"
         f"{v_cast}"),
        f"    acc = tl.dot(p.to({p_dtype}), v, acc * alpha[:, None]{pv_precision})",
        "    m_i = m_new",
        "return acc, l_i, m_i",
    ]
    return [
        "@triton.jit",
        f"def {ident}_inner(",
        "    acc, l_i, m_i, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd, offs_m, lo, hi, seq_k, qk_scale,",
        *(["    off_z, off_h,"] if tma else []),
        "    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, HEAD_DIM: tl.constexpr,",
        "    HEAD_DIM_V: tl.constexpr, MASKED: tl.constexpr,",
        "):",
        *_indented(body),
    ]


def _kernel(ident: str, group: Group, *, q_cast: str, tma: bool = False) -> list[str]:
    """One program per (batch * head, BLOCK_M query rows): its q tile, the two runs of the inner loop (the key
    blocks every row sees whole, then the masked ones), the normalisation and the store."""
    d = group.detail
    if d["causal"]:
        order = ["# the longest causal rows first, across all heads: fewer idle SMs at the end (a lead, not "
                 "measured)",
                 "n_zh = tl.num_programs(0) // n_m_blocks",
                 "start_m = n_m_blocks - 1 - pid // n_zh",
                 "off_zh = pid % n_zh"]
        bounds = ["# Causal: key blocks below the tile's first row are seen whole by every row; the keys from there "
                  "to the",
                  "# tile's last row need the mask; blocks above the diagonal are skipped.",
                  "full_end = tl.minimum(start_m * BLOCK_M + 1, seq_k) // BLOCK_N * BLOCK_N",
                  "hi = tl.minimum((start_m + 1) * BLOCK_M, seq_k)"]
    else:
        order = ["# the row blocks of one head run side by side, sharing its k and v in L2 (a lead, not "
                 "measured)",
                 "start_m = pid % n_m_blocks",
                 "off_zh = pid // n_m_blocks"]
        bounds = ["# Whole key blocks run unmasked; the last, partial one is masked.",
                  "full_end = seq_k // BLOCK_N * BLOCK_N",
                  "hi = seq_k"]
    out = "acc / l_i[:, None]"
    finish = f"out = {out}"
    if d["zero_empty_rows"]:
        finish = f"out = tl.where(l_i[:, None] > 0, {out}, 0.0)  # a row with every key masked gives 0"
    out_value = f"out.to({_tl(d['core_dtype'])})"
    if d["out_dtype"] != d["core_dtype"]:
        out_value += f".to({_tl(d['out_dtype'])})"  # rounded as the reference rounds: its dtype, then the cast
    inner_args = "q, K, V, stride_kn, stride_kd, stride_vn, stride_vd, offs_m"
    tail = ", off_z, off_h" if tma else ""
    constants = "BLOCK_N, BLOCK_D, BLOCK_DV, HEAD_DIM, HEAD_DIM_V"
    body = [
        '"""One program per (batch * head, BLOCK_M query rows): FlashAttention-2\'s forward pass."""',
        "n_m_blocks = tl.cdiv(seq_q, BLOCK_M)",
        "pid = tl.program_id(0)",
        *order,
        "off_z = off_zh // n_heads",
        "off_h = off_zh % n_heads",
        *([] if tma else ["Q += off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh",
                          "K += off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh",
                          "V += off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh"]),
        "Out += off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh",
        "",
        "offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "offs_d = tl.arange(0, BLOCK_D)",
        "offs_dv = tl.arange(0, BLOCK_DV)",
        *([f"q = Q.load([off_z, off_h, start_m * BLOCK_M, 0]).reshape(BLOCK_M, BLOCK_D){q_cast}"] if tma else [
            "q_mask = (offs_m[:, None] < seq_q) & (offs_d[None, :] < HEAD_DIM)",
            f"q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=q_mask, other=0.0)"
            f"{q_cast}"]),
        'm_i = tl.full([BLOCK_M], float("-inf"), tl.float32)',
        "l_i = tl.zeros([BLOCK_M], tl.float32)",
        "acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)",
        *bounds,
        f"acc, l_i, m_i = {ident}_inner(",
        f"    acc, l_i, m_i, {inner_args}, 0, full_end, seq_k, qk_scale{tail},",
        f"    {constants}, MASKED=False)",
        f"acc, l_i, m_i = {ident}_inner(",
        f"    acc, l_i, m_i, {inner_args}, full_end, hi, seq_k, qk_scale{tail},",
        f"    {constants}, MASKED=True)",
        finish,
        "o_mask = (offs_m[:, None] < seq_q) & (offs_dv[None, :] < HEAD_DIM_V)",
        f"tl.store(Out + offs_m[:, None] * stride_om + offs_dv[None, :] * stride_od, {out_value}, mask=o_mask)",
    ]
    return [
        "@triton.jit",
        f"def {ident}_kernel(",
        "    Q, K, V, Out,",
        "    stride_qz, stride_qh, stride_qm, stride_qd, stride_kz, stride_kh, stride_kn, stride_kd,",
        "    stride_vz, stride_vh, stride_vn, stride_vd, stride_oz, stride_oh, stride_om, stride_od,",
        "    n_heads, seq_q, seq_k, qk_scale,",
        "    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,",
        "    HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,",
        "):",
        *_indented(body),
    ]


def _launcher(graph: ProblemGraph, group: Group, config: AttentionConfig, ident: str) -> list[str]:
    d = group.detail
    local_names = {"q_view", "k_view", "v_view", "o_view", "out", "batch", "shape", "seq_q", "seq_k", "head_dim",
                   "head_dim_v", "scale", "grid"}
    params = {v: (v if v not in local_names else f"{v}_in") for v in group.inputs}
    rank = d["batch_rank"] + 2
    identity = tuple(range(rank))
    lines = [f"def {ident}({', '.join(params[v] for v in group.inputs)}):"]
    mask = "causal mask" if d["causal"] else "no mask"
    lines.append(f'    """softmax(q @ k^T * scale, {mask}) @ v, FlashAttention-2 style: the scores never leave '
                 'the chip."""')
    for name, perm_key in (("q", "q_perm"), ("k", "k_perm"), ("v", "v_perm")):
        src = params[d[name]]
        perm = tuple(d[perm_key])
        view = f"{src}.permute{perm}" if perm != tuple(range(len(perm))) else src
        lines.append(f"    {name}_view = {view}")
    lines.append("    batch = torch.broadcast_shapes(q_view.shape[:-2], k_view.shape[:-2], v_view.shape[:-2])")
    lines.append("    q_view, k_view, v_view = (t.expand(*batch, *t.shape[-2:]) for t in (q_view, k_view, v_view))")
    lines.append("    seq_q, head_dim = q_view.shape[-2:]")
    lines.append("    seq_k, head_dim_v = k_view.shape[-2], v_view.shape[-1]")
    out_dtype = d["out_dtype"]
    device = f"{params[d['q']]}.device"
    out_perm = d["out_perm"]
    if out_perm is None or tuple(out_perm) == identity:
        lines.append(f"    out = torch.empty((*batch, seq_q, head_dim_v), dtype={out_dtype}, device={device})")
        lines.append("    o_view = out")
    else:
        inverse = tuple(sorted(range(rank), key=lambda i: out_perm[i]))
        lines.append("    shape = (*batch, seq_q, head_dim_v)")
        lines.append("    # allocated in the layout the reference's output has; the kernel writes through the strides")
        lines.append(f"    out = torch.empty([shape[i] for i in {tuple(out_perm)}], dtype={out_dtype}, "
                     f"device={device})")
        lines.append(f"    o_view = out.permute{inverse}")
    if d["batch_rank"] == 1:
        lines.append("    q_view, k_view, v_view, o_view = (t[None] for t in (q_view, k_view, v_view, o_view))")
    if d["scale"] is None:
        lines.append("    scale = head_dim ** -0.5")
    else:
        lines.append(f"    scale = {d['scale']!r}")
    block_m, block_n = config.BLOCK_M, config.BLOCK_N
    lines.append(f"    grid = (triton.cdiv(seq_q, {block_m}) * q_view.shape[0] * q_view.shape[1],)")
    tensors = "q_view, k_view, v_view"
    if config.variant == "tma":
        tensors = "q_desc, k_desc, v_desc"
        lines += [
            "    from triton.tools.tensor_descriptor import TensorDescriptor",
            "    block_d = max(16, triton.next_power_of_2(head_dim))",
            "    block_dv = max(16, triton.next_power_of_2(head_dim_v))",
            f"    q_view, k_view, v_view = ({ident}_tma_ready(t)[0] for t in (q_view, k_view, v_view))",
            f"    q_desc = TensorDescriptor.from_tensor(q_view, [1, 1, {block_m}, block_d])",
            f"    k_desc = TensorDescriptor.from_tensor(k_view, [1, 1, {block_n}, block_d])",
            f"    v_desc = TensorDescriptor.from_tensor(v_view, [1, 1, {block_n}, block_dv])",
        ]
    lines.append(f"    {ident}_kernel[grid](")
    lines.append(f"        {tensors}, o_view, *q_view.stride(), *k_view.stride(), *v_view.stride(), "
                 "*o_view.stride(),")
    lines.append(f"        q_view.shape[1], seq_q, seq_k, scale * {LOG2E!r},")
    lines.append(f"        BLOCK_M={block_m}, BLOCK_N={block_n}, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),")
    lines.append("        BLOCK_DV=max(16, triton.next_power_of_2(head_dim_v)), HEAD_DIM=head_dim, "
                 "HEAD_DIM_V=head_dim_v,")
    lines.append(f"        num_warps={config.num_warps}, num_stages={config.num_stages})")
    lines.append("    return (out,)")
    return lines


def _notes(group: Group) -> tuple[str, ...]:
    d = group.detail
    notes = [f"attention ({d['form']} form): {'causal' if d['causal'] else 'no mask'}, scale "
             + ("head_dim ** -0.5 at run time" if d["scale"] is None else repr(d["scale"]))]
    if d["zero_empty_rows"]:
        notes.append("rows with every key masked give 0 (as SDPA's math path)")
    return tuple(notes)
