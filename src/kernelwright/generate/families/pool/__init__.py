"""Family 7 — pooling: max and average pooling over 2 or 3 spatial dimensions (``aten.max_pool2d_with_indices``,
``max_pool3d_with_indices``, ``avg_pool2d``, ``avg_pool3d``; 1-D pooling reaches core aten as an unsqueeze and the
2-D operator), with the pointwise epilogue that consumes the result fused into the same kernel, and the pointwise
prologue that produces the pooled tensor computed at each tap where no two windows share one.

One kernel: each program computes ``BLOCK`` output elements, flat over (planes x output positions), and loops over
each one's window. The window (kernel size, stride, padding, dilation) is structure, baked in; the input's sizes
are read at run time and the launcher sizes the output as PyTorch does (``ceil_mode`` included).

- **max**: fp32 compare from -inf, a tap taken when larger or NaN, so NaN propagates as in PyTorch. Where the
  indices (output 1) are used they are written too (int64, within the plane, PyTorch's tie and NaN rules).
- **avg**: fp32 sum divided (correctly rounded) by ``divisor_override``, else by the window clipped to the padded
  input (``count_include_pad``) or to the input; a window with nothing inside gives 0.

The pooled tensor's sources (the input, or the prologue's operands) and the epilogue's operands are read *flat*, as
a *scalar*, or *strided* (broadcast or non-contiguous, through their strides), as in the pointwise family; a
per-channel source is loaded once per element, before the window loops. Results are written contiguous in their
own dtype.

Modules: :mod:`.matching` (the pooling and its options), :mod:`.growing` (its epilogue), :mod:`.writing` (the
kernel and its launcher), :mod:`.family` (:class:`PoolFamily`).
"""

from kernelwright.generate.families.pool.family import NAME, PoolFamily

__all__ = ["NAME", "PoolFamily"]
