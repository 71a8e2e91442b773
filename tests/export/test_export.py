"""Export runs, import the package, and check the op the way PyTorch's own tooling does (CPU; fallback path)."""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from kernelwright.export.api import export_package

from .conftest import LAYERNORM, SOFTMAX, import_package, unique_package, write_run

# A problem with an int input, a parameter, a buffer and two outputs, and a candidate for it: the schema's corners.
AFFINE_PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))
        self.register_buffer("shift", torch.randn(n))

    def forward(self, x: torch.Tensor, k: int):
        return x * self.scale + self.shift, (x * k).sum(-1)

def get_inputs():
    return [torch.randn(4, 16), 3]

def get_init_inputs():
    return [16]
'''
AFFINE_CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _affine_kernel(x_ptr, s_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + offs % cols, mask=mask)
    b = tl.load(b_ptr + offs % cols, mask=mask)
    tl.store(y_ptr + offs, x * s + b, mask=mask)

class ModelNew(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))
        self.register_buffer("shift", torch.randn(n))

    def forward(self, x, k):
        x = x.contiguous()
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, self.scale, self.shift, y, x.numel(), x.shape[-1],
                                                       BLOCK=256)
        return y, (x * k).sum(-1)
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """softmax (no parameters), layernorm (parameters) and affine (int input, buffer, two outputs)."""
    base = tmp_path_factory.mktemp("export")
    problem = base / "affine.py"
    problem.write_text(AFFINE_PROBLEM)
    layernorm = base / "layernorm_small.py"  # problems/layernorm.py at dim 64
    layernorm.write_text(LAYERNORM[0].read_text().replace("dim = 8192", "dim = 64"))
    pairs = {"softmax": SOFTMAX, "layernorm": (layernorm, LAYERNORM[1]), "affine": (problem, AFFINE_CANDIDATE)}
    packages = {}
    for name, (prob, cand) in pairs.items():
        run = write_run(base / f"run_{name}", prob, cand)
        out = base / unique_package()
        result = export_package([run], out=out, name=name, isolate=False)
        packages[name] = (import_package(out), result)
    return packages


def op(packages: dict[str, Any], name: str) -> Any:
    module, result = packages[name]
    return getattr(getattr(torch.ops, result.namespace), name)


def test_package_is_plain_source_with_a_triton_op(exported: dict[str, Any]) -> None:
    module, result = exported["layernorm"]
    root = Path(module.__file__).parent
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith("__pycache__")) == [
        "README.md", "__init__.py", "_reference.py", "_runtime", "_variants", "variants.json"]
    assert (root / "_variants" / "sm_90a.py").read_text() == LAYERNORM[1].read_text()  # verbatim
    assert "dim = 64" in (root / "_reference.py").read_text()
    init = (root / "__init__.py").read_text()
    assert f'@torch.library.triton_op("{result.namespace}::layernorm"' in init
    assert "def layernorm(x: torch.Tensor, norm_weight: torch.Tensor, norm_bias: torch.Tensor)" in init
    assert "return torch.ops." + result.namespace + ".layernorm(x, self.norm.weight, self.norm.bias)" in init
    data = json.loads((root / "variants.json").read_text())
    assert data["registration"] == "triton_op"
    assert data["variants"][0]["trace"]["kernels_in_graph"] == ["_layernorm_kernel"]
    assert [s["key"] for s in data["state"]] == ["norm.weight", "norm.bias"]
    readme = (root / "README.md").read_text()
    assert "recomputes through the reference" in readme and "torch.compile" in readme
    # the package imports nothing of kernelwright
    for file in (root / "__init__.py", *sorted((root / "_runtime").glob("*.py"))):
        assert "kernelwright." not in "".join(line for line in file.read_text().splitlines()
                                              if line.startswith(("import", "from")))


def test_runtime_files_are_verbatim_copies_that_stand_alone(exported: dict[str, Any]) -> None:
    """The package's _runtime/ is kernelwright.runtime, every file byte for byte; its files import each other only
    relatively (so the imports resolve in both places) and never kernelwright; the package runs without kernelwright."""
    import kernelwright.runtime

    module, result = exported["layernorm"]
    root = Path(module.__file__).parent
    here = Path(kernelwright.runtime.__file__).parent
    ours = sorted(p.name for p in here.glob("*.py"))
    assert sorted(p.name for p in (root / "_runtime").glob("*.py")) == ours and "op.py" in ours
    for name in ours:
        text = (root / "_runtime" / name).read_text()
        assert text == (here / name).read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and f"{node.module}.py" in ours, name
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(m and m.split(".")[0] == "kernelwright" for m in modules), name
    script = (f"import sys; sys.modules['kernelwright'] = None; sys.path.insert(0, {str(root.parent)!r})\n"
              f"import torch, {root.name} as pkg\n"
              f"x = torch.randn(3, 64); w, b = torch.randn(64), torch.randn(64)\n"
              f"y = torch.ops.{result.namespace}.layernorm(x, w, b)\n"
              "assert torch.allclose(y, torch.nn.functional.layer_norm(x, (64,), w, b, 1e-5), atol=1e-5)\n"
              "assert pkg.dispatch_counts() == {'reference': 1}, pkg.dispatch_counts()\n"
              "assert not [m for m in sys.modules if m.startswith('kernelwright.')]\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_op_runs_the_reference_on_cpu(exported: dict[str, Any]) -> None:
    module, _ = exported["layernorm"]
    x, w, b = torch.randn(5, 64), torch.randn(64), torch.randn(64)
    before = module.dispatch_counts().get("reference", 0)
    y = op(exported, "layernorm")(x, w, b)
    torch.testing.assert_close(y, F.layer_norm(x, (64,), w, b, 1e-5))
    assert module.dispatch_counts()["reference"] == before + 1
    assert module.variant_for("cpu") == "reference"
    with pytest.raises(ValueError, match=r"norm.weight is \(33,\), but the op was exported for the problem's "
                                         r"Model\(64\)"):
        op(exported, "layernorm")(torch.randn(5, 33), torch.randn(33), torch.randn(33))


def test_module_loads_the_original_state_dict(exported: dict[str, Any]) -> None:
    from kernelwright.runtime.modules import load_module

    module, _ = exported["layernorm"]
    problem = load_module("kwt_layernorm_problem", LAYERNORM[0])
    original = problem.Model(64)
    mine = module.Layernorm(64)
    assert list(mine.state_dict()) == list(original.state_dict())
    mine.load_state_dict(original.state_dict())
    x = torch.randn(3, 64)
    before = module.dispatch_counts().get("reference", 0)
    torch.testing.assert_close(mine(x), original(x))
    assert module.dispatch_counts()["reference"] == before + 1  # through the op
    assert str(inspect.signature(module.Layernorm)) == str(inspect.signature(problem.Model))


def test_module_built_otherwise_runs_the_reference(exported: dict[str, Any]) -> None:
    from kernelwright.runtime.modules import load_module

    module, _ = exported["layernorm"]
    original = load_module("kwt_layernorm_problem_48", LAYERNORM[0]).Model(48)
    with pytest.warns(UserWarning, match=r"Layernorm\(48\) is not the configuration layernorm was exported for"):
        mine = module.Layernorm(48)
    mine.load_state_dict(original.state_dict())
    x = torch.randn(3, 48)
    torch.testing.assert_close(mine(x), original(x))


def test_schema_with_int_input_buffer_and_two_outputs(exported: dict[str, Any]) -> None:
    module, _ = exported["affine"]
    schema = str(op(exported, "affine").default._schema)
    assert "(Tensor x, SymInt k, Tensor scale, Tensor shift) -> (Tensor, Tensor)" in schema
    m = module.Affine(16)
    y, s = m(torch.ones(2, 16), 3)
    torch.testing.assert_close(y, m.scale.detach().expand(2, 16) + m.shift)
    torch.testing.assert_close(s, torch.full((2,), 48.0))


@pytest.mark.parametrize("name", ["softmax", "layernorm", "affine"])
def test_opcheck(exported: dict[str, Any], name: str) -> None:
    args = {"softmax": lambda g: (torch.randn(4, 37, requires_grad=g),),
            "layernorm": lambda g: (torch.randn(4, 64, requires_grad=g), torch.randn(64, requires_grad=g),
                                    torch.randn(64, requires_grad=g)),
            "affine": lambda g: (torch.randn(4, 16, requires_grad=g), 2, torch.randn(16, requires_grad=g),
                                 torch.randn(16))}[name]
    for grad in (False, True):
        torch.library.opcheck(op(exported, name).default, args(grad))


def test_gradcheck_in_double_precision(exported: dict[str, Any]) -> None:
    """fp64 is not the kernel's verified dtype, so this runs the reference forward; it checks the backward op."""
    x = torch.randn(2, 64, dtype=torch.float64, requires_grad=True)
    w = torch.randn(64, dtype=torch.float64, requires_grad=True)
    b = torch.randn(64, dtype=torch.float64)  # not every argument needs a gradient
    assert torch.autograd.gradcheck(op(exported, "layernorm"), (x, w, b), fast_mode=True)
    s = torch.randn(16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, s: op(exported, "affine")(x, 3, s, torch.zeros(16, dtype=s.dtype)),
                                    (torch.randn(2, 16, dtype=torch.float64, requires_grad=True), s), fast_mode=True)


def test_torch_compile_fullgraph_matches_eager(exported: dict[str, Any]) -> None:
    module, _ = exported["layernorm"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(24, 64), module.Layernorm(64), torch.nn.ReLU())
    x = torch.randn(6, 24)
    eager_out = model(x)
    eager_out.sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True)  # fullgraph: a graph break would raise
    out = compiled(x)
    out.sum().backward()
    torch.testing.assert_close(out, eager_out)
    for p, g in zip(model.parameters(), eager_grads):
        torch.testing.assert_close(p.grad, g)


def test_inductor_sees_the_kernel_on_a_cuda_device(exported: dict[str, Any]) -> None:
    """AOTAutograd traces the op as torch.compile would on an sm_90 GPU (fake CUDA tensors, no GPU needed): the
    variant's kernel becomes a triton_kernel_wrapper node; on an sm_75 GPU the reference's aten ops appear."""
    from torch._functorch.aot_autograd import aot_function
    from torch._subclasses.fake_tensor import FakeTensorMode

    module, _ = exported["softmax"]
    softmax = op(exported, "softmax")
    targets: dict[tuple[int, int], list[str]] = {}
    logging.getLogger("torch._dynamo").disabled = True  # no GPU driver: the mutation analysis logs, then copes
    try:
        for capability in ((9, 0), (7, 5)):
            graphs: list[Any] = []

            def capture(gm: Any, _inputs: Any, graphs: list[Any] = graphs) -> Any:
                graphs.append(gm)
                return gm

            # running the captured graph needs a real GPU: only the capture matters
            with module.assume_capability(capability), FakeTensorMode(), contextlib.suppress(RuntimeError):
                aot_function(lambda x: softmax(x) * 2, fw_compiler=capture)(torch.empty(64, 1000, device="cuda"))
            targets[capability] = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    finally:
        logging.getLogger("torch._dynamo").disabled = False
    assert "triton_kernel_wrapper_functional" in targets[(9, 0)]
    assert "aten._softmax.default" not in targets[(9, 0)]
    assert "aten._softmax.default" in targets[(7, 5)]


def test_variant_choice_by_capability_and_precision(make_run: Any, tmp_path: Path) -> None:
    runs = [make_run(SOFTMAX, arch="sm_90a"), make_run(SOFTMAX, arch="sm_80"),
            make_run(SOFTMAX, arch="sm_80", tf32=True, median_ms=0.1)]
    out = tmp_path / unique_package()
    result = export_package(runs, out=out, name="softmax", isolate=False, trace=False)
    assert result.variants == ("sm_90a", "sm_80", "sm_80_tf32")
    module = import_package(out)
    assert module.variant_for(capability=(9, 0)) == "sm_90a"
    assert module.variant_for(capability=(8, 6)) == "sm_80"
    assert module.variant_for(capability=(8, 6), precision="high") == "sm_80_tf32"
    assert module.variant_for(capability=(10, 0)) == "sm_80"
    assert module.variant_for(capability=(7, 5)) == "reference"
    assert [v["id"] for v in module.variants()] == ["sm_90a", "sm_80", "sm_80_tf32"]
    assert "0.1000 ms, 1.50x eager" in module.describe()


def test_a_cuda_cpp_variant_is_a_custom_op(make_run: Any, tmp_path: Path) -> None:
    """load_inline code is opaque to Inductor: custom_op with the reference as the fake; never imported on the CPU."""
    root = Path(__file__).resolve().parents[2]
    run = make_run((root / "problems" / "vector_add.py", root / "examples" / "vector_add_cuda.py"))
    out = tmp_path / unique_package()
    result = export_package([run], out=out, name="vector_add", isolate=False)
    assert result.registration == "custom_op" and "CUDA C++ (load_inline)" in result.registration_reason
    module = import_package(out)
    assert "@torch.library.custom_op" in Path(module.__file__).read_text()
    a, b = torch.randn(100), torch.randn(100)
    vector_add = getattr(torch.ops, result.namespace).vector_add
    torch.testing.assert_close(vector_add(a, b), a + b)
    torch.library.opcheck(vector_add.default, (a.requires_grad_(), b))
    assert module.variant_for(capability=(9, 0)) == "sm_90a" and module.variants()[0]["language"] == "cuda"
    assert f"{module.__name__}._variants.sm_90a" not in sys.modules  # built only on a GPU, at first use


def test_a_variant_that_does_not_trace_makes_a_custom_op(make_run: Any, tmp_path: Path) -> None:
    """A kernel launched through a container wrap_triton cannot reach would break torch.compile inside a triton_op:
    the export-time trace sees it and registers a custom_op (opaque, still no graph break) instead."""
    source = SOFTMAX[1].read_text()
    source = source.replace("_softmax_one_pass_kernel[(n_rows,)](", "_KERNELS['one'][(n_rows,)](")
    source = source.replace("def _num_warps(", "_KERNELS = {'one': _softmax_one_pass_kernel}\n\n\ndef _num_warps(")
    out = tmp_path / unique_package()
    result = export_package([make_run(SOFTMAX, candidate=source)], out=out, name="softmax", isolate=False)
    assert result.registration == "custom_op"
    assert "variant sm_90a did not trace into Triton kernel calls" in result.registration_reason
    module = import_package(out)
    assert "Why not `triton_op`: variant sm_90a did not trace" in (out / "README.md").read_text()
    x = torch.randn(3, 20)
    model = module.Softmax()
    compiled = torch.compile(lambda x: model(x) + 1, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), x.softmax(-1) + 1)
    torch.library.opcheck(getattr(torch.ops, result.namespace).softmax.default, (x,))
