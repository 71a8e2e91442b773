"""Family 5 — attention, FlashAttention-2 style: ``softmax(q @ k^T * scale [+ causal mask]) @ v`` in one kernel
that never writes the [L, S] scores.

Two spellings of attention are claimed:

* **written out** — ``bmm`` (QK^T) → scale (``mul``/``div`` by a number) → optional mask → ``_softmax`` over
  the last dim → ``bmm`` with v, with the views, expands, permutes, clones and dtype casts ``torch.matmul`` and
  ``F.scaled_dot_product_attention``'s math decomposition put around them (this is what capture on the CPU shows
  for SDPA too). The mask is accepted only when it is provably the causal one: a subgraph of constants
  (``full``/``arange``/``sub``/comparisons/logical ops/``where``) that, evaluated symbolically, masks exactly the
  keys ``j > i`` (lower-triangular, ``diagonal=0``) — applied with ``where(mask, -inf, s)`` or added as a 0/-inf
  bias. The "fully masked row → 0" fix-up of SDPA's decomposition (``eq``/``any``/``where`` around the softmax)
  is recognised and reproduced.
* **one SDPA operator** — ``scaled_dot_product_attention``, ``_scaled_dot_product_flash_attention`` (+``_for_cpu``),
  ``_efficient_attention``, ``_cudnn_attention``, ``_attention_math``: its arguments decide (``dropout_p`` must be
  0, no GQA, ``attn_mask`` absent or the causal constant, only the output used).

Anything else — arbitrary or input-dependent masks, dropout, softmax over another dim, attention weights returned
too — is left to PyTorch (``claim`` returns None). The q/k/v projections are GEMMs: another family's.

The kernel is one program per (batch × head, ``BLOCK_M`` query rows) looping over ``BLOCK_N`` key blocks with the
online softmax (running max and sum in fp32), ``tl.dot`` for QK^T and PV (fp16/bf16 operands → tensor cores;
fp32 problems → ``input_precision="ieee"``), the scale folded into ``exp2`` with log2(e). Key blocks that every
row of the tile sees in full run without masks; the causal diagonal and the sequence tails run a masked copy of
the loop; key blocks wholly above the diagonal are never visited. Sizes, strides and the head dim are read from
the tensors at run time (q/k/v may be strided views: nothing is copied); the head dim is padded to a power of two
(≥ 16) with masks.

Modules: :mod:`.matching` (the two spellings and what they compute), :mod:`.mask` (the symbolic evaluation of a
mask), :mod:`.growing` (the output's casts and layout copies, the constants), :mod:`.writing` (the kernels and
the launcher), :mod:`.family` (:class:`AttentionFamily`, its configurations).
"""

from kernelwright.generate.families.attention.family import NAME, AttentionFamily

__all__ = ["NAME", "AttentionFamily"]
