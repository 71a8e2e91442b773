"""Family 6 — 2-D convolution with its epilogue: ``aten.convolution`` (NCHW, groups 1, not transposed) followed by
its bias, an eval-mode batch norm (``_native_batch_norm_legit_no_training``), and the pointwise nodes that consume
the result (activations, a residual, casts), all applied in one pass over the output.

Two variants, configurations of one group so the tuner can choose:

- **library** (the default): the launcher runs ``aten.convolution`` *without* its bias (cuDNN on a GPU), then one
  Triton kernel of ours applies bias + batch norm + the pointwise epilogue in a single read and write of the
  output, one program per (image, channel) plane so the per-channel parameters are loaded once as scalars.
  Precision: in an fp32 problem cuDNN must not use TF32; the verifier's children set
  ``torch.backends.cudnn.allow_tf32`` from the precision policy (off unless TF32 is allowed), and the generated
  file relies on that process setting rather than changing global flags itself. Offered only when there is an
  epilogue to apply (a bare convolution would gain nothing but a copy).
- **implicit GEMM**: a Triton convolution. The output pixels (image x OH x OW, flattened) are the GEMM's M, the
  output channels its N, and the K loop walks the filter taps (kh, kw) and, inside each tap, the input channels
  ``BLOCK_K`` at a time, gathering the input patch with masks for padding, stride and dilation. ``tl.dot``
  (tensor cores for fp16/bf16; fp32 problems ``input_precision="ieee"`` unless the policy allows TF32). The
  epilogue is applied to the fp32 accumulator before the single store.

Groups > 1, transposed, 1-D and 3-D convolutions are left to PyTorch.

Modules: :mod:`.matching` (the convolution and who is who in a group), :mod:`.growing` (its batch norm and
pointwise epilogue), :mod:`.writing` (both variants' kernels and launchers), :mod:`.family` (:class:`ConvFamily`).
"""

from kernelwright.generate.families.conv.family import NAME, ConvFamily

__all__ = ["NAME", "ConvFamily"]
