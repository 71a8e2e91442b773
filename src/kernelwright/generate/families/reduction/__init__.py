"""Family 2 — reductions: softmax, log-softmax, LayerNorm, GroupNorm, RMSNorm, sum/mean, var/std, amax/amin,
max/min with indices, argmax/argmin, vector norms and cross-entropy, each with its pointwise prologue and epilogue,
in one kernel (or, for few long rows, one kernel and a small merging one).

**What a group is.** An anchor (a reduction operator) fixes the *layout*: the reduced input's shape and which
dimensions it reduces — a contiguous range of them. Trailing reduced dimensions give a *row* layout (``n_out`` rows
of ``n_red`` contiguous elements); reduced dimensions followed by others give a *strided* layout (``[n_outer, n_red,
n_inner]``, reduced with loads coalesced along the contiguous inner dimension); GroupNorm's (sample, group) rows are
a row layout of their own. The group then grows around the anchor: pointwise consumers (element-wise on the full
shape or per output row), further reductions over the same rows (a hand-written softmax or LayerNorm: amax, sub,
exp, sum, div), sibling reductions of the same input (``x.mean()`` beside ``x.var()``: one read), ``gather`` along
the reduced dimension (cross-entropy picks the target's log-probability), views that only add or drop size-1
dimensions of per-row values, and the pointwise producers whose every use is inside (a residual ``add``, the
``x.float()`` of RMSNorm, a weight cast). Every value in the kernel is either a *full* tile (one element of the
input's shape per lane) or a *per-row* vector (one per output); per-row values broadcast over the tile.

**How the kernel runs.** Reductions that depend on earlier ones (a hand-written softmax's sum needs the max) are
ordered into *passes*. Strategy ``single`` holds a whole row in registers (``BLOCK_N = next_pow2(n_red)`` at run
time; short rows pack several per program) and runs every pass on it; strategy ``loop`` walks the row in
``BLOCK_N`` chunks once per pass, with per-lane accumulators (sum, max, argmax), an online max/sum for softmax (one
exp per element) and a chunk-wise Welford merge (Chan et al.) for mean and variance — then a last pass writes the
full-shape outputs. Strategy ``split`` (one pass, per-row outputs only) cuts each row into shares reduced by
separate programs into a workspace, and a second kernel merges the shares and computes what follows per row — for
few outputs over long rows (a column minimum, a full sum), which would otherwise leave most SMs idle. Floating math
is fp32 (half inputs are widened on load); results are rounded once, at the store. No atomics: every value is
written by one program, shares merge in a fixed order, so results are deterministic.

**Semantics kept exactly.** NaN propagates as in PyTorch (amax/max/argmax treat NaN as the largest value, its first
index wins); ties go to the first index; LayerNorm/GroupNorm use the biased variance and the graph's eps, var/std
the graph's correction; output dtypes, ``keepdim`` shapes and index dtypes are the graph's. What does not fit
(integer inputs, non-contiguous reduced dimensions, operands that broadcast neither per row nor per element, p-norms
other than 1, 2 and ±inf) stays in PyTorch.

Modules: :mod:`.model` (the layout, the kernel's values and the operations that define them), :mod:`.matching` (the
reduction operators and what they compute), :mod:`.growing` (the group grown around its anchor), :mod:`.body`
(one kernel's body, pass by pass), :mod:`.writing` (the kernels' signatures and the launcher), :mod:`.family`
(:class:`ReductionFamily`, its strategies and configurations).
"""

from kernelwright.generate.families.reduction.family import NAME, ReductionFamily

__all__ = ["NAME", "ReductionFamily"]
