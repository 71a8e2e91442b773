"""Family 6 — convolution with its epilogue: ``aten.convolution`` (1-D NCL, 2-D NCHW or 3-D NCDHW; strided, padded,
dilated; any groups, depthwise included; transposed too, with output padding) followed by its bias, an eval-mode
batch norm (``_native_batch_norm_legit_no_training``), and the pointwise nodes that consume the result
(activations, a residual, casts), all applied in one pass over the output.

Two variants, configurations of one group so the tuner can choose:

- **library** (the default): the launcher runs ``aten.convolution`` *without* its bias (cuDNN on a GPU), then one
  Triton kernel of ours applies bias + batch norm + the pointwise epilogue in a single read and write of the
  output, one program per (image, channel) plane so the per-channel parameters are loaded once as scalars.
  Offered only with a batch norm or a pointwise epilogue: with a bias alone the library would do all the work.
  Precision: in an fp32 problem cuDNN must not use TF32; the verifier's children set
  ``torch.backends.cudnn.allow_tf32`` from the precision policy (off unless TF32 is allowed), and the generated
  file relies on that process setting rather than changing global flags itself. Offered only when there is an
  epilogue to apply (a bare convolution would gain nothing but a copy).
- **library, channels-last** (2-D and 3-D, last in the space): the same library call on channels-last copies of
  the input and weight, so the library writes its output channels-last with no layout kernel after it; our epilogue
  then reads tiles of pixels x channels along the channels and writes the NCHW result (it replaces the library's
  output transpose: 29 of the 150 us of conv2d_bn_relu_bf16's library winner on the H200, ncu run 43).
- **implicit GEMM**: a Triton convolution. The output pixels (image x [OD x] OH x OW, flattened) are the GEMM's M,
  the output channels its N, and the K loop walks the filter taps ([kd,] kh, kw; a compile-time rank, the filter's
  sizes constexpr) and, inside each tap, the input channels ``BLOCK_K`` at a time, gathering the input patch with
  masks for padding, stride and dilation; spatial sizes are read from the tensors at run time. ``tl.dot`` (tensor
  cores for fp16/bf16; fp32 problems ``input_precision="ieee"`` unless the policy allows TF32). The epilogue is
  applied to the fp32 accumulator before the single store. Grouped (groups > 1): a program's channel tile lies in
  one group, whose slice of the input channels is K (C_in / groups x taps); the launcher reads groups back from the
  tensors. A depthwise convolution is this kernel with one input channel per group: correct, with the K block
  (16, the least ``tl.dot`` takes) mostly masked — memory-bound work done as a GEMM, a first version.

A transposed convolution is the same implicit GEMM gathering by output phase (:mod:`.transposed`): each
program's pixels share their position modulo the stride, so its K loop walks only the taps that reach them.

Modules: :mod:`.matching` (the convolution and who is who in a group), :mod:`.growing` (its batch norm and
pointwise epilogue), :mod:`.spatial` (names and index arithmetic for rank 1, 2 and 3), :mod:`.transposed` (the transposed kernel's gather by
phase), :mod:`.writing` (both
variants' kernels and launchers), :mod:`.family` (:class:`ConvFamily`).
"""

from kernelwright.generate.families.conv.family import NAME, ConvFamily

__all__ = ["NAME", "ConvFamily"]
