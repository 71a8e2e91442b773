"""Export what ``kernelwright optimize`` really writes (the template generator, proven under the interpreter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kernelwright.export.api import export_package

from .conftest import ROOT, import_package, unique_package


@pytest.mark.slow
def test_export_an_optimize_run(tmp_path: Path) -> None:
    from kernelwright.search.optimize import optimize

    run = tmp_path / "run"
    result = optimize(ROOT / "examples" / "problems" / "softmax_small.py", out_dir=run, budget_s=60, device="cpu")
    assert result.best is not None and result.best.verdict is not None and result.best.verdict.passed
    meta = json.loads((run / "run.json").read_text())
    out = tmp_path / unique_package()
    exported = export_package([run], out=out, name="softmax", isolate=False)
    assert exported.registration == "triton_op" and exported.variants == (meta["arch"],)
    module = import_package(out)
    variant = module.variants()[0]
    assert variant["source"]["run"] == str(run.resolve()) and variant["verdict"]["status"] == "passed"
    assert variant["trace"]["ok"] and variant["trace"]["kernels_in_graph"]  # the template's kernel, traced
    x = torch.randn(4, 1000)
    torch.testing.assert_close(module.Softmax()(x), x.softmax(-1))
    torch.library.opcheck(getattr(torch.ops, exported.namespace).softmax.default, (x,))
