"""Family 1: pointwise chains, proven under the interpreter on small and odd shapes."""

from __future__ import annotations

import pytest

from kernelwright.records import Status


def _families(plan) -> list[str]:
    return [g.family for g in plan.groups]


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_chain_of_same_shape_inputs(check, n: int) -> None:
    plan, verdict = check(f"gelu_mul_{n}", f"""
        class Model(nn.Module):
            def forward(self, x, y):
                return F.gelu(x) * y + 1.0

        n = {n}

        def get_inputs():
            return [torch.randn(n), torch.randn(n)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert _families(plan) == ["pointwise"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


def test_broadcast_bias_scalar_parameter_and_second_shape(check) -> None:
    plan, verdict = check("bias_silu_scale", """
        class Model(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(features))
                self.scale = nn.Parameter(torch.tensor(1.5))

            def forward(self, x):
                return F.silu(x + self.bias) * self.scale - torch.tanh(x)

        rows = 33
        features = 127

        def get_inputs():
            return [torch.randn(rows, features)]

        def get_init_inputs():
            return [features]
    """)
    assert _families(plan) == ["pointwise"]
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


@pytest.mark.slow
def test_half_precision_with_explicit_casts(check) -> None:
    plan, verdict = check("swish_fp16", """
        class Model(nn.Module):
            def forward(self, x, y):
                return (torch.sigmoid(x.float()) * y.float()).to(torch.float16) + x

        def get_inputs():
            return [torch.randn(17, 250, dtype=torch.float16), torch.randn(17, 250, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """)
    assert _families(plan) == ["pointwise"]
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_non_contiguous_operand_and_clamp_where(check) -> None:
    plan, verdict = check("transposed_clamp", """
        class Model(nn.Module):
            def forward(self, x, y):
                z = x.t() * 2.0 + y
                return torch.where(z > 0, torch.clamp(z, max=1.5), torch.relu(-z) * 0.25)

        def get_inputs():
            return [torch.randn(40, 24), torch.randn(24, 40)]

        def get_init_inputs():
            return []
    """)
    assert "pointwise" in _families(plan)
    assert verdict.status is Status.PASSED, verdict.message
