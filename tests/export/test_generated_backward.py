"""The op's backward from the run's generated backward kernels (``optimize --backward``), end to end on the CPU:
optimize writes and proves the backward problem, export packages it, and under ``TRITON_INTERPRET=1`` the op's
gradients come from those kernels and match the reference's. A backward folder of another problem is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.export.api import export_package

from .conftest import unique_package

PROBLEM = '''
import torch
import torch.nn as nn

rows = 6
dim = 40


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, residual):
        return self.norm(x + residual)


def get_inputs():
    return [torch.randn(rows, dim), torch.randn(rows, dim)]


def get_init_inputs():
    return [dim]
'''

SCRIPT = r'''
import importlib, json, sys
import torch
import torch.nn.functional as F

pkg = importlib.import_module(sys.argv[1])
op = getattr(torch.ops, "kernelwright_" + pkg.__name__).layernorm_residual
torch.manual_seed(0)
x, r = torch.randn(5, 40, requires_grad=True), torch.randn(5, 40, requires_grad=True)
w, b = torch.randn(40, requires_grad=True), torch.randn(40, requires_grad=True)
weights = torch.randn(5, 40)
got = torch.autograd.grad((op(x, r, w, b) * weights).sum(), (x, r, w, b))
want = torch.autograd.grad((F.layer_norm(x + r, (40,), w, b, 1e-5) * weights).sum(), (x, r, w, b))
print(json.dumps({"errors": [float((g - h).abs().max()) for g, h in zip(got, want)],
                  "counts": pkg.dispatch_counts()}))
'''


# One optimize --backward run shared by the module (about 14 s): the whole module is a slow case; the backward
# plans and their numbers are tests/generate/test_backward.py's, in the default run.
pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def run_with_backward(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("generated_backward")
    problem = base / "layernorm_residual.py"
    problem.write_text(PROBLEM)
    run = base / "run"
    assert main(["optimize", str(problem), "--out", str(run), "--device", "cpu", "--backward"]) == 0
    return run


def test_optimize_writes_and_proves_the_backward(run_with_backward: Path) -> None:
    folder = run_with_backward / "backward"
    source = (folder / "problem.py").read_text()
    assert "GRADIENTS = ['x', 'residual', 'norm.weight', 'norm.bias']" in source
    meta = json.loads((folder / "run.json").read_text())
    assert meta["passed"], (folder / "report.md").read_text()
    assert "kw_reduction" in (folder / "best.py").read_text()  # the row sums of the backward are a template's


def test_the_op_takes_its_gradients_from_the_generated_kernels(run_with_backward: Path, tmp_path: Path) -> None:
    out = tmp_path / unique_package()
    result = export_package([run_with_backward], out=out, name="layernorm_residual", isolate=False, trace=False)
    assert result.backward == "generated"
    spec = json.loads((out / "variants.json").read_text())
    assert spec["variants"][0]["backward"]["gradients"] == ["x", "residual", "norm.weight", "norm.bias"]
    assert (out / "_variants" / "sm_90a_backward.py").is_file()
    assert "Generated backward kernels" in (out / "README.md").read_text()
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, out.name], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["counts"] == {"sm_90a": 1, "sm_90a:backward": 1}, found
    assert max(found["errors"]) < 1e-4, found


def test_a_backward_of_another_problem_is_not_used(run_with_backward: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_with_backward, run)
    meta_path = run / "backward" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["problem_source"] = meta["problem_source"].replace("FORWARD_SHA256 = '", "FORWARD_SHA256 = '0")
    meta_path.write_text(json.dumps(meta))
    out = tmp_path / unique_package()
    result = export_package([run], out=out, name="layernorm_residual", isolate=False, trace=False)
    assert result.backward == "reference-vjp"
    variant = json.loads((out / "variants.json").read_text())["variants"][0]
    assert variant["backward"] is None and "not generated from this run's problem" in variant["backward_note"]

    # the reference's backward gives x and residual one and the same gradient tensor: the op returns copies (a
    # custom op's outputs may not alias each other; this failed before)
    import torch
    import torch.nn.functional as F

    from .conftest import import_package

    module = import_package(out)
    op = getattr(torch.ops, result.namespace).layernorm_residual
    x, r = torch.randn(5, 40, requires_grad=True), torch.randn(5, 40, requires_grad=True)
    w, b = torch.randn(40), torch.randn(40)
    gx, gr = torch.autograd.grad((op(x, r, w, b) * torch.arange(40.0)).sum(), (x, r))
    (want,) = torch.autograd.grad((F.layer_norm(x + r, (40,), w, b, 1e-5) * torch.arange(40.0)).sum(), (x,))
    torch.testing.assert_close(gx, want)
    torch.testing.assert_close(gr, want)
    assert module.dispatch_counts()["reference:backward"] == 1


@pytest.mark.gpu
def test_generated_backward_on_cuda(run_with_backward: Path, tmp_path: Path) -> None:
    """On a GPU of the variant's arch (sm_90a: an H100/H200), the generated backward kernels run on CUDA tensors,
    eagerly and inside a compiled training step."""
    import torch
    import torch.nn.functional as F

    from .conftest import import_package

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the run's variant is sm_90a: needs a compute capability 9.0 GPU")
    out = tmp_path / unique_package()
    result = export_package([run_with_backward], out=out, name="layernorm_residual", isolate=False)
    module = import_package(out)
    op = getattr(torch.ops, result.namespace).layernorm_residual
    torch.manual_seed(0)
    x, r = (torch.randn(512, 40, device="cuda", requires_grad=True) for _ in range(2))
    w, b = (torch.randn(40, device="cuda", requires_grad=True) for _ in range(2))
    weights = torch.randn(512, 40, device="cuda")
    got = torch.autograd.grad((op(x, r, w, b) * weights).sum(), (x, r, w, b))
    want = torch.autograd.grad((F.layer_norm(x + r, (40,), w, b, 1e-5) * weights).sum(), (x, r, w, b))
    for g, h in zip(got, want):
        torch.testing.assert_close(g, h, rtol=1e-4, atol=1e-4)
    assert module.dispatch_counts().get("sm_90a:backward") == 1
    compiled = torch.compile(lambda *a: (op(*a) * weights).sum(), fullgraph=True)
    again = torch.autograd.grad(compiled(x, r, w, b), (x, r, w, b))
    for g, h in zip(again, want):
        torch.testing.assert_close(g, h, rtol=1e-4, atol=1e-4)
    assert module.dispatch_counts().get("sm_90a:backward") == 2
