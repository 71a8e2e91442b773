"""Template families, one module each (pointwise, reduction, scan, gemm, attention, conv)."""
