"""Reading the files users bring: KernelBench problem files and candidate (``ModelNew``) files."""
