"""Every family's rendered candidate traces with fake CUDA tensors into Triton kernel calls.

That is what `kernelwright export` needs to register a candidate as a `triton_op` (so `torch.compile` and Inductor
see its kernels) instead of an opaque `custom_op`. A launcher that reads something a fake tensor does not have —
``data_ptr()``, ``.item()``, a host copy — fails here (the GEMM's 16-byte alignment check did, on the suite's bmm).
The probe is the export's own (in this process, as ``kernelwright.load`` runs it), with the kernels compiled
rather than interpreted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.export.probe import run_probe

from .conftest import generate, write_problem

CASES = {
    "pointwise": """
        class Model(nn.Module):
            def forward(self, x, bias):
                return F.silu(x + bias)

        def get_inputs():
            return [torch.randn(7, 33, dtype=torch.bfloat16), torch.randn(33, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """,
    "reduction": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(40)

            def forward(self, x, residual):
                return self.norm(x + residual)

        def get_inputs():
            return [torch.randn(5, 40), torch.randn(5, 40)]

        def get_init_inputs():
            return []
    """,
    "scan": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.cumsum(x * 2, dim=1)

        def get_inputs():
            return [torch.randn(3, 50)]

        def get_init_inputs():
            return []
    """,
    "gemm": """
        class Model(nn.Module):
            def forward(self, a, b):
                return torch.bmm(a, b)

        def get_inputs():
            # big enough (batch*M*N*K = 2**24) for the launcher's operand-alignment check to run
            return [torch.randn(2, 256, 128, dtype=torch.float16), torch.randn(2, 128, 256, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """,
    "linear": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(40, 24, dtype=torch.bfloat16)

            def forward(self, x):
                return F.gelu(self.fc(x))

        def get_inputs():
            return [torch.randn(9, 40, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """,
    "attention": """
        class Model(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def get_inputs():
            return [torch.randn(1, 2, 40, 32, dtype=torch.float16) for _ in range(3)]

        def get_init_inputs():
            return []
    """,
    "conv": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)

            def forward(self, x):
                return torch.relu(self.conv(x))

        def get_inputs():
            return [torch.randn(2, 3, 9, 7)]

        def get_init_inputs():
            return []
    """,
}


@pytest.mark.parametrize(("name", "config_index"), [(name, 0) for name in CASES] + [("gemm", 1), ("conv", 1)])
def test_rendered_candidate_traces_into_triton_kernels(tmp_path: Path, name: str, config_index: int) -> None:
    problem = write_problem(tmp_path, f"trace_{name}", CASES[name])
    _, candidate = generate(problem, tmp_path / f"trace_{name}_candidate.py", config_index=config_index)
    probed = run_probe({"reference": str(problem), "trace": True,
                        "variants": [{"id": "v", "path": str(candidate), "language": "triton"}]},
                       isolate=False)  # our own generated code: in this process, as kernelwright.load does
    assert probed["ok"], probed["message"]
    trace = probed["variants"]["v"]["trace"]
    assert trace["ok"], trace["message"]
    assert trace["kernels_in_graph"], trace
