"""Helpers for template tests: write a small problem, generate the default candidate, verify it on the CPU."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelwright.generate.emit import emit
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import Plan, load_families, plan
from kernelwright.verify.records import Verdict, VerifyOptions
from kernelwright.verify.verifier import verify

PROBLEM_HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

# The start of a script a test runs in a process of its own (under TRITON_INTERPRET=1, which must be set before
# triton is imported): ``load(path, name)`` imports a problem or candidate file.
SCRIPT_LOADER = """
import importlib.util, sys
import torch
from kernelwright.runtime.interpreter import install_interpreter_patch_cache
install_interpreter_patch_cache()  # as the verifier's candidate job has it

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
"""


def write_problem(directory: Path, name: str, body: str) -> Path:
    path = directory / f"{name}.py"
    path.write_text(PROBLEM_HEADER + textwrap.dedent(body).strip() + "\n")
    return path


def generate(problem: Path, out: Path, *, config_index: int = 0,
             config_overrides: dict | None = None) -> tuple[Plan, Path]:
    """Capture, plan and emit the candidate using each group's ``config_index``-th config (clamped), with
    ``config_overrides`` laid over it (a render option the space does not offer yet)."""
    families = {f.name: f for f in load_families()}
    graph = capture(problem)
    the_plan = plan(graph, list(families.values()))
    configs = []
    for group in the_plan.groups:
        space = families[group.family].space(graph, group, "sm_90a")
        configs.append({**space[min(config_index, len(space) - 1)], **(config_overrides or {})})
    source = emit(the_plan, families, configs, title=f"test candidate for {problem.name}")
    out.write_text(source)
    return the_plan, out


@pytest.fixture
def check(tmp_path: Path) -> Callable[..., tuple[Plan, Verdict]]:
    """check(name, problem_body, **verify_options) -> (plan, verdict) for the default candidate on the CPU."""

    def run(name: str, body: str, *, config_index: int = 0, config_overrides: dict | None = None,
            **options) -> tuple[Plan, Verdict]:
        problem = write_problem(tmp_path, name, body)
        the_plan, candidate = generate(problem, tmp_path / f"{name}_candidate.py", config_index=config_index,
                                       config_overrides=config_overrides)
        verdict = verify(problem, candidate, VerifyOptions(device="cpu", seed=3, **options))
        return the_plan, verdict

    return run
