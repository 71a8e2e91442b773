"""kernelwright optimize on a GPU: tuning in the worker, finalists verified, the winner timed against baselines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kernelwright.search.optimize import optimize

pytestmark = pytest.mark.gpu


def test_tunes_times_and_verifies_a_pointwise_problem(tmp_path: Path) -> None:
    problem = tmp_path / "gelu_mul_gpu.py"
    problem.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def forward(self, x, y):
                return F.gelu(x) * y + 1.0

        rows = 4096
        cols = 4096

        def get_inputs():
            return [torch.randn(rows, cols), torch.randn(rows, cols)]

        def get_init_inputs():
            return []
    """))
    result = optimize(problem, out_dir=tmp_path / "run", device="cuda", budget_s=180.0)  # 90 s kept for the verify
    timed = [o for o in result.outcomes if o.median_ms is not None]
    assert len(timed) >= 2  # the default and at least one alternative configuration
    assert result.best is not None and result.best.verdict is not None and result.best.verdict.passed
    verdict = json.loads((tmp_path / "run" / "verdict.json").read_text())
    assert {"candidate", "eager", "compile", "compile_max_autotune"} <= set(verdict["timing"])
