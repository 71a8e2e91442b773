"""Family 4 — GEMM, batched GEMM and linear layers, with the pointwise epilogue fused on the accumulator tile.

Anchors: ``aten.mm``, ``aten.addmm`` (``nn.Linear`` with a bias; ``beta``/``alpha``), ``aten.bmm`` and
``aten.baddbmm`` (export decomposes the latter into ``bmm`` + ``mul`` + ``add``, which the epilogue absorbs).

The group also takes the *glue* export puts around them. Before the matmul, on each operand: the chain of
``permute``/``t``/``transpose``/``view``/``expand``/``unsqueeze``/``clone`` nodes (and one dtype cast) between
a tensor and the matmul — ``x @ W.t()``, ``[B, T, C] -> [B*T, C]`` for a linear on 3-D input, the ``expand`` +
``view`` of a broadcast batched ``matmul``. After it: ``view``s back to the caller's shape and every pointwise
node of the tile's shape that reads the result (bias, activation, scale, residual, cast; a DAG, so
``silu = x * sigmoid(x)`` fuses too), plus the pointwise nodes that only compute such an operand (``beta * c``).

Glue sizes are baked into the graph (``view(x, [15, 16])``), which would pin a candidate to the benchmark's
shape. Every dimension is therefore tracked symbolically, as a product of the group inputs' dimensions
(``x.shape[0] * x.shape[1]``), and the launcher replays the glue with sizes read at run time: permutes as
``permute``, views as ``reshape`` (a view; a copy only where the strides cannot merge), expands as ``expand``.
The kernel reads every operand through its strides, so a transposed weight is read in place, never copied.

Kernel: one program per ``BLOCK_M x BLOCK_N`` output tile (a second grid axis walks the batch) in grouped
("swizzled") order, so ``GROUP_M`` row blocks reuse each column block of B from L2; a ``tl.dot`` K loop with
fp32 accumulation (fp16/bf16 operands: tensor cores, HGMMA on sm_90a; fp32 operands:
``input_precision="ieee"``, SIMT FMA, unless the policy allows TF32); masks on every edge, so any M, N, K
works; 64-bit tile origins, so a matrix may exceed 2**31 elements. The epilogue is computed on the fp32 tile
by :class:`expr.PointwiseEmitter` and rounded once, at the store. What the family cannot do exactly (integer
or fp64 matmuls, glue it cannot read) stays in PyTorch.

Modules: :mod:`.model` (symbolic sizes, glue steps, operands, the plan a group holds), :mod:`.matching` (the matmul
and the glue on its operands), :mod:`.growing` (its epilogue), :mod:`.writing` (the kernel and its launcher),
:mod:`.family` (:class:`GemmFamily`, its configurations).
"""

from kernelwright.generate.families.gemm.family import NAME, GemmFamily

__all__ = ["NAME", "GemmFamily"]
