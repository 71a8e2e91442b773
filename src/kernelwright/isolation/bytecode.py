"""Compiled bytecode where the installation has none.

A Python installed read-only without ``.pyc`` files (a shared GPU machine's image, ``pip install --no-compile``)
compiles torch's ~1,600 modules from source in every process: 3-6 s per verify job on the H200 machine (run 51).
The trusted parent then keeps bytecode in kernelwright's cache (``sys.pycache_prefix``) as it imports, and the
jobs read it from there (``PYTHONPYCACHEPREFIX``); the jobs themselves never write bytecode
(``PYTHONDONTWRITEBYTECODE``, :func:`kernelwright.isolation.process.scrubbed_environment`).
An installation that has its ``.pyc`` files, or can write them, is left alone: a prefix would hide them. A set
``PYTHONDONTWRITEBYTECODE`` (the GPU machine's image sets it, run 52) keeps bytecode out of the source tree, which
the prefix does too: the parent writes there all the same. A ``PYTHONPYCACHEPREFIX`` the user chose is theirs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def _needs_prefix(module: str = "torch") -> bool:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    cached = importlib.util.cache_from_source(spec.origin)
    if os.path.exists(cached):
        return False
    if sys.dont_write_bytecode:  # none will ever be written beside the sources
        return True
    folder = os.path.dirname(cached)
    return not os.access(folder if os.path.isdir(folder) else os.path.dirname(folder), os.W_OK)


def enable(cache_dir: Path | str, module: str = "torch") -> str | None:
    """Keep bytecode under ``cache_dir/pycache`` when ``module``'s installation has none and cannot hold any; the
    prefix chosen (also in ``PYTHONPYCACHEPREFIX`` for the children), or None when nothing was changed."""
    if sys.pycache_prefix or os.environ.get("PYTHONPYCACHEPREFIX"):
        return None
    try:
        if not _needs_prefix(module):
            return None
        prefix = Path(cache_dir) / "pycache"
        prefix.mkdir(parents=True, exist_ok=True)
    except (OSError, ImportError, ValueError):
        return None
    sys.pycache_prefix = str(prefix)
    sys.dont_write_bytecode = False  # this (trusted) process writes; the jobs only read
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    return str(prefix)
