"""Graph matching over the project's problem suite: each problem's graph is captured and every operator is claimed
by the family that should own it (nothing of the suite is left to PyTorch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.generate.graph import capture
from kernelwright.generate.plan import load_families, plan

PROBLEMS = Path(__file__).resolve().parents[2] / "problems"

EXPECTED = {
    "argmax_lastdim": ["reduction"], "attention_causal_fp16": ["attention"], "attention_sdpa_bf16": ["attention"],
    "bias_silu_bf16": ["pointwise"], "bmm_fp16": ["gemm"], "conv2d_bias_relu": ["conv"],
    "conv2d_bn_relu_bf16": ["conv"], "cross_entropy": ["reduction"], "cumprod": ["scan"], "cumsum": ["scan"],
    "cumsum_dim1": ["scan"], "gelu_mul": ["pointwise"], "gemm_residual_scale_bf16": ["gemm"],
    "global_avgpool_bf16": ["reduction"], "groupnorm": ["reduction"], "layernorm": ["reduction"],
    "layernorm_mlp_residual": ["reduction", "gemm", "gemm"], "layernorm_residual_bf16": ["reduction"],
    "linear_gelu_bf16": ["gemm"], "linear_relu": ["gemm"], "log_softmax_bf16": ["reduction"], "matmul": ["gemm"],
    "matmul_bf16": ["gemm"], "matmul_fp32": ["gemm"], "max_lastdim_fp16": ["reduction"], "min_dim0": ["reduction"],
    "mlp_block_bf16": ["gemm", "gemm"], "residual_layerscale": ["pointwise"], "rmsnorm_fp16": ["reduction"],
    "scale_shift_clamp_fp16": ["pointwise"], "softmax": ["reduction"], "sum_dim1": ["reduction"],
    "swiglu_bf16": ["pointwise"], "transformer_attention_fp16": ["gemm", "attention", "gemm"],
    "vector_add": ["pointwise"], "vector_norm": ["reduction"],
}  # fmt: skip


def test_every_suite_problem_has_an_expectation() -> None:
    assert sorted(p.stem for p in PROBLEMS.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_suite_problem_is_claimed_by_its_families(name: str) -> None:
    graph = capture(PROBLEMS / f"{name}.py")
    assert graph.dynamic, "sizes should be captured as symbols so uncovered reshapes follow the run-time shape"
    the_plan = plan(graph, load_families())
    assert [g.family for g in the_plan.groups] == EXPECTED[name], the_plan.describe()
    assert the_plan.fully_covered, the_plan.describe()


def test_the_share_of_the_work_left_to_pytorch_is_said(tmp_path) -> None:
    from tests.generate.conftest import write_problem

    from kernelwright.generate.plan import node_work

    problem = write_problem(tmp_path, "gemm_then_sort", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 32)

            def forward(self, x):
                return torch.sort(torch.relu(self.fc(x)), dim=-1)[0]

        def get_inputs():
            return [torch.randn(16, 64)]

        def get_init_inputs():
            return []
    """)
    graph = capture(problem)
    the_plan = plan(graph)
    work = {n.op: node_work(graph, n) for n in graph.nodes}
    assert work["addmm"] == 2 * 16 * 32 * 64 and work["sort"] == 16 * 32
    total = sum(w for op, w in work.items() if op in ("addmm", "relu", "sort"))
    assert abs(the_plan.own_work - (1 - 16 * 32 / total)) < 1e-9
    assert the_plan.describe()[-1] == "left to PyTorch: aten.sort (0.8% of the work; own kernels 99.2%)"
