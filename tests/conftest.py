"""Shared test set-up: an isolated kernelwright cache, and `gpu` tests skipped where no CUDA device is visible."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bytecode_cache() -> None:
    """Before anything imports torch, as the CLI does (isolation/bytecode.py): on the GPU machine's image (no .pyc,
    PYTHONDONTWRITEBYTECODE set) pytest and every verifier child it starts compiled torch from source, 5-9 s a
    process. The user's cache, not the tests' isolated one: bytecode is keyed by source path and mtime."""
    from kernelwright.config import config
    from kernelwright.isolation import bytecode

    bytecode.enable(config.cache_dir)


_bytecode_cache()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine through the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Children inherit the environment, so the cache location is set there, not only in config.scope()."""
    cache = tmp_path_factory.mktemp("kernelwright-cache")
    previous = os.environ.get("KERNELWRIGHT_CACHE_DIR")
    os.environ["KERNELWRIGHT_CACHE_DIR"] = str(cache)
    # Triton's own cache is shared with the developer's machine: compiled kernels are keyed by content.
    yield cache
    if previous is None:
        os.environ.pop("KERNELWRIGHT_CACHE_DIR", None)
    else:
        os.environ["KERNELWRIGHT_CACHE_DIR"] = previous


@pytest.fixture
def repo_root() -> Path:
    return ROOT
