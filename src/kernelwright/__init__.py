"""kernelwright: GPU kernels that are proven correct, proven faster, and proven to run the instructions they claim.

The package mirrors the pipeline (docs/architecture.md), one role per subpackage:

- ``kernelwright.problem``   — reading KernelBench problem and candidate files
- ``kernelwright.verify``    — the verifier: isolation, correctness, integrity, timing, roofline
- ``kernelwright.hardware``  — the hardware knowledge base, occupancy, measured ceilings
- ``kernelwright.inspect``   — instruction-level evidence (SASS classification, expectations)
- ``kernelwright.export``    — verified runs as a ``torch.library`` op package; :func:`load`

Importing ``kernelwright`` has no side effects and pulls in nothing beyond the standard library;
each role imports torch/triton only when used.
"""

from __future__ import annotations

from pathlib import Path

from kernelwright.version import __version__

__all__ = ["__version__", "load"]


def load(*runs: str | Path, name: str | None = None) -> type:
    """The ``nn.Module`` class of the op ``kernelwright export`` would package from these run folders (one per
    arch and precision policy), without writing a package: it is built once in the kernelwright cache and imported,
    registering ``torch.ops.kernelwright_<package>.<name>``. ``load(...).__module__`` is that package."""
    from kernelwright.export.api import load as load_package

    return load_package(*runs, name=name)
