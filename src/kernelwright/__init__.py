"""kernelwright: GPU kernels that are proven correct, proven faster, and proven to run the instructions they claim.

The package mirrors the pipeline in DESIGN.md, one role per subpackage:

- ``kernelwright.problem``   — reading KernelBench problem and candidate files
- ``kernelwright.verify``    — the verifier: isolation, correctness, integrity, timing, roofline
- ``kernelwright.hardware``  — the hardware knowledge base, occupancy, measured ceilings
- ``kernelwright.inspect``   — instruction-level evidence (SASS classification, expectations)

Importing ``kernelwright`` has no side effects and pulls in nothing beyond the standard library;
each role imports torch/triton only when used.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
