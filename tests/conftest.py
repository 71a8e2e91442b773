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
    settings = {"KERNELWRIGHT_CACHE_DIR": str(cache), CPU_INSTRUCTIONS: "0"}
    previous = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    # Triton's own cache is shared with the developer's machine: compiled kernels are keyed by content.
    yield cache
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# A CPU verify cross-compiles the candidate's kernels for sm_90a for its instruction summary (0.7 s of a 2 s verify,
# in the job's own Triton cache, which no other job may share). Tests about that summary, or about what a verdict
# does with it, are marked `instructions` and get it; the other ~150 end-to-end verifies judge what they test
# without it (each summary rule is exercised end to end by the marked ones).
CPU_INSTRUCTIONS = "KERNELWRIGHT_CPU_INSTRUCTIONS"


@pytest.fixture(autouse=True)
def _instructions_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("instructions") is not None:
        monkeypatch.setenv(CPU_INSTRUCTIONS, "1")


@pytest.fixture
def repo_root() -> Path:
    return ROOT
