"""kernelwright's bottom layer: what runs kernels and loads code, for every process that does — the verifier's
children, the template generator's probes, the export probe and every exported op.

- :mod:`.interpreter` — whether Triton's interpreter is on (``TRITON_INTERPRET``, parsed here once) and the fixes
  kernelwright installs in it;
- :mod:`.modules` — a Python file loaded as a module;
- :mod:`.dispatch` and :mod:`.op` — an exported op's runtime: which verified variant runs for a call, and running it.

The folder imports only the standard library, torch and (lazily) triton and numpy, its files each other only
relatively, so a package ``kernelwright export`` writes carries it verbatim as ``_runtime/`` and runs where
kernelwright is not installed. Names are loaded on first use (importing the package imports no torch).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "interpret_requested": "interpreter", "interpreting": "interpreter", "check_interpreter": "interpreter",
    "install_interpreter_bf16_dot_fix": "interpreter", "install_interpreter_patch_cache": "interpreter", "load_module": "modules",
    "PRECISIONS": "dispatch", "PRECISION_LABELS": "dispatch", "VariantSpec": "dispatch", "runs_on": "dispatch",
    "precision_allows": "dispatch", "select_variant": "dispatch", "launched_kernels": "dispatch",
    "wrap_launches": "dispatch", "build_instance": "dispatch",
    "OpRuntime": "op", "REFERENCE": "op", "BACKWARD_SUFFIX": "op", "runs_on_text": "op", "format_variants": "op",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
