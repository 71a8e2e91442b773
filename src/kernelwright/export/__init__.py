"""Shipping a verified kernel: runs -> a Python package that registers a ``torch.library`` op.

- ``runs``     — reading run folders (``run.json``, ``best.py``, ``verdict.json``) as variants of one op
- ``probe``    — the op's signature and each variant's fit, found by running the code (in a child for the CLI)
- ``package``  — rendering ``__init__.py``, ``README.md`` and ``variants.json``
- every package carries :mod:`kernelwright.runtime` verbatim as ``_runtime/``: which variant runs where, running
  it (standard library, torch and Triton only)
- ``api``      — :func:`export_package` and :func:`load`; ``cli`` — ``kernelwright export``

Importing this package imports nothing heavy; see docs/export.md.
"""

from __future__ import annotations
