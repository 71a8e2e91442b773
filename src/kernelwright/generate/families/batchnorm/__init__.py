"""Family 8 — batch statistics normalisation: training-mode batch norm (``_native_batch_norm_legit_functional``,
with the running statistics updated as PyTorch updates them and written back to the module's buffers by the
emitted ModelNew) and the same operator without running statistics (``_native_batch_norm_legit``: what
``InstanceNorm`` exports, a batch norm of the input viewed as ``[1, N * C, *]``), with the pointwise nodes that
consume the normalised tensor fused into its last pass.

Three kernels, all shape-generic (sizes read from the tensors at run time):

1. **partial statistics**: a grid of (channel, share); each program reduces its share of the channel's
   ``N x spatial`` elements block by block, merging each block's count, mean and sum of squared deviations into a
   running triple (Chan's parallel formula, in fp32): no sum of squares minus square of sums, so no cancellation.
2. **finalise**: per channel (vectorised over channels), the shares merged the same way; the biased variance
   normalises, ``rstd = 1 / sqrt(var + eps)`` correctly rounded; the saved mean and rstd are stored where the
   graph uses them, and the running statistics as ``(1 - momentum) * running + momentum * batch`` with the
   unbiased variance, as PyTorch does.
3. **apply**: flat over the input, ``(x - mean) * rstd * weight + bias`` with the channel's four scalars
   gathered per element, then the epilogue, one store per output.

The share count is chosen at launch so that channels x shares fills the GPU (a 64-channel batch norm over 16M
elements per channel still runs hundreds of programs). Modules: :mod:`.matching`, :mod:`.writing`,
:mod:`.family` (:class:`BatchNormFamily`).
"""

from kernelwright.generate.families.batchnorm.family import NAME, BatchNormFamily

__all__ = ["NAME", "BatchNormFamily"]
