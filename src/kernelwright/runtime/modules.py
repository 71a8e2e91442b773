"""Loading a Python file as a module: problem files, candidates, exported variants and packages.

Standard library only, like the rest of :mod:`kernelwright.runtime`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any


def load_module(name: str, path: Path, *, package_dir: Path | None = None) -> Any:
    """Execute ``path`` as module ``name`` (registered in ``sys.modules``, which Triton's look-ups expect);
    ``package_dir``: ``path`` is that package's ``__init__.py``, and its submodules are found there."""
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[str(package_dir)] if package_dir is not None else None)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
