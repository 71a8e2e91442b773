"""Family 3 — scans: ``aten.cumsum`` and ``aten.cumprod`` along one dimension, with the pointwise prologue that
produces the scanned value and the pointwise epilogue that consumes the result fused into the same kernel.

The tensor is seen as ``[outer, L, inner]`` (``L`` the scanned dimension). Two kernel shapes, chosen by structure:

- **rows** (the last dimension, ``inner == 1``): each program takes ``ROWS`` rows and walks them left to right,
  ``BLOCK_N`` columns at a time: ``tl.cumsum`` (or ``tl.associative_scan`` with a product) inside the tile plus a
  running total per row carried from tile to tile. Short rows are packed several to a program, so a
  ``[100000, 7]`` problem does not launch 100000 mostly idle programs.
- **columns** (an inner dimension): each program takes one outer index and ``BLOCK_I`` neighbouring inner columns,
  and walks down ``L`` in ``[BLOCK_L, BLOCK_I]`` tiles scanned along axis 0. Loads stay coalesced along the
  contiguous inner dimension; a running total per column is carried down.

Accumulation is fp32 for half and fp32 inputs, fp64 for fp64, int64 for integers and bools (PyTorch's cumsum and
cumprod of an integer tensor are int64). Operands are read *flat* (contiguous, the result's shape), as a
*scalar*, or *strided* (broadcast or non-contiguous: per-dimension indices times the operand's strides), as the
pointwise family does; the result is written contiguous.

Modules: :mod:`.matching` (the scan operator and its types), :mod:`.growing` (its prologue and epilogue),
:mod:`.writing` (the kernel and its launcher), :mod:`.family` (:class:`ScanFamily`).
"""

from kernelwright.generate.families.scan.family import NAME, ScanFamily

__all__ = ["NAME", "ScanFamily"]
