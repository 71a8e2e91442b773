"""The CUDA C++ GEMM kernels on a GPU: every CUDA configuration the family offers on this GPU's arch (wgmma on
sm_90a, mma.sync on sm_80 and later), built by its candidate's own helper and run against the problem's Model at
shapes with tails in M, N and K, an operand copied K-major, and row, column and tile epilogue operands."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from kernelwright.search.candidates import template_builder

from .conftest import write_problem
from .test_gemm_cuda import LINEAR_GELU, MATMUL_MIX

pytestmark = pytest.mark.gpu

SQUARE = """
    class Model(nn.Module):
        def forward(self, a, b):
            return torch.relu(a @ b.t())

    def get_inputs():
        return [torch.randn(1024, 2048, dtype=torch.bfloat16), torch.randn(768, 2048, dtype=torch.bfloat16)]

    def get_init_inputs():
        return []
"""


def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}" + ("a" if major == 9 else "")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("name", "body"), [("lg", LINEAR_GELU), ("mix", MATMUL_MIX), ("square", SQUARE)])
def test_every_cuda_config_matches_the_model(tmp_path: Path, name: str, body: str) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    problem = write_problem(tmp_path, name, body)
    _, builder = template_builder(problem, tmp_path / "candidates", arch=_arch(), backend="cuda")
    (space,) = builder.spaces
    assert all(c.get("backend") == "cuda" for c in space), space
    reference = _load(problem, f"ref_{name}")
    torch.manual_seed(0)
    model = reference.Model(*reference.get_init_inputs()).cuda()
    inputs = [t.cuda() for t in reference.get_inputs()]
    want = model.float()(*(t.float() for t in inputs))
    model = model.to(inputs[0].dtype)
    for index, config in enumerate(space):
        candidate = _load(builder.build((index,), f"cuda {index}").path, f"cand_{name}_{index}")
        new = candidate.ModelNew(*reference.get_init_inputs()).cuda().to(inputs[0].dtype)
        new.load_state_dict(model.state_dict())
        got = new(*inputs)
        torch.cuda.synchronize()
        assert got.dtype == inputs[0].dtype
        scale = want.abs().max().item()
        error = (got.float() - want).abs().max().item()
        assert error <= 2e-2 * scale + 2e-2, f"{config['variant']} {config['BLOCK_N']}: max error {error} of {scale}"
