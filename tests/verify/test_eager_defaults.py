"""Eager at PyTorch's defaults beside eager at the problem's precision (issue 29 item 5): which problems get it
timed, and the check that finds an fp32 convolution in a forward (the part that runs on the CPU)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelwright.records import Policy
from kernelwright.verify.baseline import (
    EAGER_DEFAULTS,
    mentions_convolution,
    plan_baselines,
    runs_fp32_convolutions,
)


class _Judge:
    def add(self, *args: object, **kwargs: object) -> None:
        pass


def _opts(allow_tf32: bool = False, reuse: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(policy=Policy(allow_tf32=allow_tf32), compile_baseline=True, compile_modes=None,
                           reuse_baselines=reuse or {})


def _plan(opts: SimpleNamespace, device: str = "cuda", convolutions: bool = True) -> tuple[list, dict]:
    return plan_baselines(opts, _Judge(), device=device, convolutions=convolutions)


def test_the_defaults_baseline_is_planned_for_convolutions_on_cuda_only(tmp_path: Path) -> None:
    variants, _ = _plan(_opts())
    assert variants[:2] == ["eager", EAGER_DEFAULTS] and "compile" in variants
    assert EAGER_DEFAULTS not in _plan(_opts(allow_tf32=True))[0]  # eager runs TF32 already: the two are one
    assert EAGER_DEFAULTS not in _plan(_opts(), device="cpu")[0]  # nothing is timed on the CPU
    assert EAGER_DEFAULTS not in _plan(_opts(), convolutions=False)[0]  # no baseline job for nothing
    conv, linear = tmp_path / "conv.py", tmp_path / "linear.py"
    conv.write_text("import torch.nn.functional as F\ny = lambda x, w: F.conv2d(x, w)\n")
    linear.write_text("import torch.nn as nn\nlayer = nn.Linear(4, 4)  # convolutional networks aside\n")
    assert mentions_convolution(conv) and not mentions_convolution(linear)
    assert not mentions_convolution(tmp_path / "missing.py")
    measured = {"median_ms": 1.0, "min_ms": 1.0, "q1_ms": 1.0, "q3_ms": 1.0, "mean_ms": 1.0, "reps": 5,
                "host_ms_per_call": 0.0, "flush_ms": 0.0, "unexplained_ms_per_call": 0.0, "iqr_ms": 0.0}
    reused = {EAGER_DEFAULTS: measured}
    variants, kept = _plan(_opts(reuse=reused))
    assert EAGER_DEFAULTS not in variants and EAGER_DEFAULTS in kept  # bench's baseline cache serves it too


def test_fp32_convolutions_are_found_in_a_forward() -> None:
    conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    assert runs_fp32_convolutions(conv, [torch.randn(1, 3, 8, 8)])

    class Functional(nn.Module):
        def forward(self, x, w):
            return F.conv_transpose1d(x, w)

    assert runs_fp32_convolutions(Functional(), [torch.randn(1, 2, 9), torch.randn(2, 3, 3)])
    assert not runs_fp32_convolutions(nn.Linear(4, 4), [torch.randn(2, 4)])  # cuBLAS: PyTorch's default is IEEE
    half = nn.Conv1d(2, 2, 3).to(torch.bfloat16)
    assert not runs_fp32_convolutions(half, [torch.randn(1, 2, 9, dtype=torch.bfloat16)])
    assert not runs_fp32_convolutions(conv, [torch.randn(1, 5, 8, 8)])  # a forward that fails says no
