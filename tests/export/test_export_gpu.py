"""On a GPU: the exported op runs the variant's real kernels, torch.compile (Inductor) calls the Triton kernel
itself, opcheck and gradients hold, and a CUDA C++ variant runs as a custom_op. Skipped without a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from kernelwright.export.api import export_package

from .conftest import LAYERNORM, SOFTMAX, import_package, unique_package, write_run

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def _arch_here() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}" + ("a" if major == 9 else "")


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("export_gpu")
    layernorm = base / "layernorm_small.py"
    layernorm.write_text(LAYERNORM[0].read_text().replace("dim = 8192", "dim = 1024"))
    found = {}
    for name, (problem, candidate), archs in (("softmax", SOFTMAX, (_arch_here(), "sm_80")),
                                              ("layernorm", (layernorm, LAYERNORM[1]), (_arch_here(),))):
        runs = [write_run(base / f"run_{name}_{arch}", problem, candidate, arch=arch) for arch in archs]
        out = base / unique_package()
        result = export_package(runs, out=out, name=name, isolate=False)
        assert result.registration == "triton_op", result.registration_reason
        found[name] = (import_package(out), getattr(getattr(torch.ops, result.namespace), name))
    return found


def test_the_variant_for_this_gpu_runs(packages: dict[str, Any]) -> None:
    module, softmax = packages["softmax"]
    assert module.variant_for("cuda") == _arch_here()
    x = torch.randn(64, 1000, device="cuda")
    before = module.dispatch_counts()
    torch.testing.assert_close(softmax(x), x.softmax(-1))
    assert module.dispatch_counts().get(_arch_here(), 0) == before.get(_arch_here(), 0) + 1
    with module.assume_capability((8, 6)):  # an sm_86 GPU would take the sm_80 variant (Triton JITs it here)
        torch.testing.assert_close(softmax(x), x.softmax(-1))
    assert module.dispatch_counts().get("sm_80", 0) >= 1


def test_inductor_calls_the_triton_kernel(packages: dict[str, Any]) -> None:
    from torch._inductor.utils import run_and_get_code

    module, _ = packages["layernorm"]
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), module.Layernorm(1024), torch.nn.GELU()).cuda()
    x = torch.randn(32, 256, device="cuda")
    eager = model(x)
    compiled = torch.compile(model, fullgraph=True)
    out, codes = run_and_get_code(compiled, x)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    assert any("_layernorm_kernel" in code for code in codes), "Inductor's output code does not launch the kernel"


def test_opcheck_and_gradients_on_cuda(packages: dict[str, Any]) -> None:
    module, layernorm = packages["layernorm"]
    x = torch.randn(16, 1024, device="cuda", requires_grad=True)
    w = torch.randn(1024, device="cuda", requires_grad=True)
    b = torch.randn(1024, device="cuda", requires_grad=True)
    torch.library.opcheck(layernorm.default, (x, w, b))
    r = torch.randn(16, 1024, device="cuda")
    got = torch.autograd.grad((layernorm(x, w, b) * r).sum(), (x, w, b))
    want = torch.autograd.grad((F.layer_norm(x, (1024,), w, b, 1e-5) * r).sum(), (x, w, b))
    for g, h in zip(got, want):
        torch.testing.assert_close(g, h, rtol=1e-4, atol=1e-4)


def test_compiled_training_step(packages: dict[str, Any]) -> None:
    module, _ = packages["layernorm"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 1024), module.Layernorm(1024)).cuda()
    x = torch.randn(8, 64, device="cuda")
    model(x).square().mean().backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch.compile(model, fullgraph=True)(x).square().mean().backward()
    for p, g in zip(model.parameters(), eager):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)


def test_cuda_cpp_variant_as_custom_op(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", ROOT / "problems" / "vector_add.py", ROOT / "examples" / "vector_add_cuda.py",
                    arch=_arch_here())
    out = tmp_path / unique_package()
    result = export_package([run], out=out, name="vector_add", isolate=False)
    assert result.registration == "custom_op"
    module = import_package(out)
    vector_add = getattr(torch.ops, result.namespace).vector_add
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    torch.testing.assert_close(vector_add(a, b), a + b)
    assert module.dispatch_counts() == {_arch_here(): 1}
    compiled = torch.compile(lambda a, b: vector_add(a, b) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(a, b), (a + b) * 2)
    torch.library.opcheck(vector_add.default, (a, b))
