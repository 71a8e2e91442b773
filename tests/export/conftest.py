"""Run folders built directly (faster than ``optimize``): an example candidate, its problem, a passed verdict."""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = (ROOT / "examples" / "problems" / "softmax_small.py", ROOT / "examples" / "softmax_triton.py")
LAYERNORM = (ROOT / "problems" / "layernorm.py", ROOT / "examples" / "layernorm_triton.py")


def write_run(folder: Path, problem: Path, candidate: Path | str, *, arch: str = "sm_90a", tf32: bool = False,
              reduced: bool = False, status: str = "passed", median_ms: float | None = None) -> Path:
    """A run folder as ``kernelwright optimize`` leaves it (run.json, best.py, verdict.json)."""
    folder.mkdir(parents=True)
    source = problem.read_text()
    best = candidate if isinstance(candidate, str) else candidate.read_text()
    (folder / "best.py").write_text(best)
    sha = hashlib.sha256(source.encode()).hexdigest()
    (folder / "run.json").write_text(json.dumps({
        "kind": "kernelwright-run", "version": 1, "generator": "templates", "run_id": None,
        "problem": str(problem), "problem_name": problem.stem, "problem_sha256": sha, "problem_source": source,
        "arch": arch, "device": "cpu", "device_name": "x86_64", "timed": median_ms is not None,
        "allow_tf32": tf32, "allow_reduced_precision": reduced, "best": "best.py", "status": status,
        "passed": status == "passed",
    }))
    (folder / "verdict.json").write_text(json.dumps({
        "status": status, "message": "correct on every trial (test fixture)", "clean": True,
        "problem_sha256": sha, "candidate_sha256": hashlib.sha256(best.encode()).hexdigest(),
        "seed": 1, "device": {"type": "cpu", "name": "x86_64", "interpreter": True},
        "timing": {"candidate": {"median_ms": median_ms}} if median_ms is not None else {},
        "speedups": {"vs_eager": 1.5} if median_ms is not None else {},
        "kernels": [{"name": "k", "origin": "own"}], "findings": [],
    }))
    return folder


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1000))

    def make(pair: tuple[Path, Path] = SOFTMAX, candidate: Path | str | None = None, **kwargs: Any) -> Path:
        problem, example = pair
        return write_run(tmp_path / f"run{next(counter)}", problem, example if candidate is None else candidate,
                         **kwargs)

    return make


def unique_package() -> str:
    return f"kwt_{uuid.uuid4().hex[:10]}"


def import_package(out: Path) -> Any:
    """Import an exported package by putting its parent on sys.path (as a user would)."""
    sys.path.insert(0, str(out.parent))
    try:
        return importlib.import_module(out.name)
    finally:
        sys.path.remove(str(out.parent))
