"""Family 1 — pointwise chains: any connected run of elementwise operators with one result shape, with
broadcasting operands and scalar parameters, fused into one kernel that reads every input once and writes every
needed result once.

The kernel walks the result's elements flat, ``BLOCK`` at a time. Each operand is read in one of three ways,
decided from its shape when the source is generated and checked again by the launcher at run time: *flat*
(contiguous, the result's shape: ``ptr + offs``, 128-bit loads where aligned), *scalar* (one element), or
*strided* (broadcast or non-contiguous: per-dimension indices times the operand's strides, broadcast dimensions
skipped). Floating math is fp32; results are rounded to their dtype once, at the store.

Modules: :mod:`.matching` (the connected run from an anchor), :mod:`.growing` (producers and constants it absorbs),
:mod:`.writing` (the kernel and its launcher), :mod:`.family` (:class:`PointwiseFamily`).
"""

from kernelwright.generate.families.pointwise.family import NAME, PointwiseFamily

__all__ = ["NAME", "PointwiseFamily"]
