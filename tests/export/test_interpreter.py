"""With TRITON_INTERPRET=1 the op runs the variant's real Triton kernels on CPU tensors: forward and gradients.

Triton's interpreter must be switched on before triton is imported (its tl.sum / tl.max are @triton.jit
functions), so this runs in a fresh process, as a user's process would with the variable in its environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernelwright.export.api import export_package

from .conftest import LAYERNORM, SOFTMAX, unique_package, write_run

SCRIPT = r'''
import importlib, json, sys
import torch
import torch.nn.functional as F

softmax_pkg, layernorm_pkg = (importlib.import_module(name) for name in sys.argv[1:3])
result = {}
torch.manual_seed(0)

x = torch.randn(7, 1000, requires_grad=True)
softmax = getattr(torch.ops, "kernelwright_" + softmax_pkg.__name__).softmax
y = softmax(x)
result["softmax_max_err"] = (y - x.softmax(-1)).abs().max().item()
weights = torch.randn(7, 1000)
(g,) = torch.autograd.grad((y * weights).sum(), x)
(ref_g,) = torch.autograd.grad((x.softmax(-1) * weights).sum(), x)
result["softmax_grad_err"] = (g - ref_g).abs().max().item()
kernel = sys.modules[softmax_pkg.__name__ + "._variants.sm_90a_interpreted"]._softmax_one_pass_kernel
result["softmax_kernel_type"] = type(kernel).__name__
xt = torch.randn(1000, 7).t()  # a transposed (non-contiguous) argument: made contiguous before the kernel
result["softmax_transposed_err"] = (softmax(xt) - xt.softmax(-1)).abs().max().item()
result["softmax_counts"] = softmax_pkg.dispatch_counts()

m = layernorm_pkg.Layernorm(64)
x = torch.randn(5, 64) * 3 + 1
x.requires_grad_(True)
out = m(x)
ref = F.layer_norm(x, (64,), m.norm.weight, m.norm.bias, 1e-5)
result["layernorm_max_err"] = (out - ref).abs().max().item()
r = torch.randn(5, 64)
got = torch.autograd.grad((out * r).sum(), (x, m.norm.weight, m.norm.bias))
want = torch.autograd.grad((ref * r).sum(), (x, m.norm.weight, m.norm.bias))
result["layernorm_grad_err"] = max((a - b).abs().max().item() for a, b in zip(got, want))
result["layernorm_counts"] = layernorm_pkg.dispatch_counts()
result["cpu_choice"] = layernorm_pkg.variant_for("cpu")
print(json.dumps(result))
'''


def test_interpreter_runs_the_triton_variant(tmp_path: Path) -> None:
    layernorm = tmp_path / "layernorm_small.py"
    layernorm.write_text(LAYERNORM[0].read_text().replace("dim = 8192", "dim = 64"))
    names = []
    for name, (problem, candidate) in {"softmax": SOFTMAX, "layernorm": (layernorm, LAYERNORM[1])}.items():
        run = write_run(tmp_path / f"run_{name}", problem, candidate)
        out = tmp_path / unique_package()
        export_package([run], out=out, name=name, isolate=False, trace=False)
        names.append(out.name)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *names], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["softmax_kernel_type"] == "InterpretedFunction"
    # the kernel ran (twice), not the reference; these runs have no generated backward: the reference's ran
    assert result["softmax_counts"] == {"sm_90a": 2, "reference:backward": 1}
    assert result["softmax_transposed_err"] < 1e-6
    assert result["layernorm_counts"] == {"sm_90a": 1, "reference:backward": 1}
    assert result["softmax_max_err"] < 1e-6
    assert result["layernorm_max_err"] < 1e-4
    # the backward recomputes through the reference: the kernel's forward and the reference's gradients agree
    assert result["softmax_grad_err"] < 1e-5
    assert result["layernorm_grad_err"] < 1e-4
    assert result["cpu_choice"] == "sm_90a"


AUTOTUNED_ADD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def _add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        n = a.numel()
        _add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](a, b, out, n)
        return out
"""

AUTOTUNED_SCRIPT = r'''
import importlib, json, sys
import torch

pkg = importlib.import_module(sys.argv[1])
op = getattr(torch.ops, "kernelwright_" + pkg.__name__).vector_add
a, b = torch.randn(3000), torch.randn(3000)
print(json.dumps({"err": float((op(a, b) - (a + b)).abs().max()), "counts": pkg.dispatch_counts()}))
'''


def test_an_autotuned_variant_runs_under_the_interpreter(tmp_path: Path) -> None:
    # Autotuning benchmarks configs, which needs a GPU driver: the exported op runs the first config there.
    run = write_run(tmp_path / "run", Path(__file__).resolve().parents[2] / "problems" / "vector_add.py",
                    AUTOTUNED_ADD)
    out = tmp_path / unique_package()
    export_package([run], out=out, name="vector_add", isolate=False, trace=False)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", AUTOTUNED_SCRIPT, out.name], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["counts"] == {"sm_90a": 1} and result["err"] == 0.0, result
