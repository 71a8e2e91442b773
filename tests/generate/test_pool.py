"""Family 7: max and average pooling (1-D through the unsqueezed 2-D operator, 2-D, 3-D) with stride, padding,
dilation, ceil_mode, count_include_pad and divisor_override, max pooling's indices, and fused epilogues — proven
under the interpreter on small, odd shapes in fp32 and bf16."""

from __future__ import annotations

import pytest

from kernelwright.generate.graph import capture
from kernelwright.generate.plan import plan as make_plan
from kernelwright.records import Status

from .conftest import write_problem


def _pool_groups(plan):
    return [g for g in plan.groups if g.family == "pool"]


def _ops(plan, group) -> list[str]:
    return [plan.graph.node(n).op for n in group.nodes]


MAX_2D = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True, return_indices=True)

        def forward(self, x, y):
            values, indices = self.pool(x)
            return torch.relu(values - 0.25), indices, F.silu(F.avg_pool2d(y, 2))

    batch = 2
    height = 7
    width = 9

    def get_inputs():
        x = torch.randn(batch, 1, height, width)
        x.view(-1)[::37] = float("nan")  # max pooling propagates NaN (and points its index at it)
        return [x, torch.randn(batch, 3, height, width, dtype=torch.bfloat16)]

    def get_init_inputs():
        return []
"""


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 2])
def test_max_pool_2d_indices_nan_epilogue_and_bf16(check, config_index: int) -> None:
    # Dilation and ceil_mode; the indices (output 1) written too; an epilogue on the values. A bf16 pooling
    # computes in fp32 and rounds once, after its epilogue (silu, a DAG: x * sigmoid(x)). Two configurations.
    plan, verdict = check(f"max2d_{config_index}", MAX_2D, config_index=config_index, distribution_trials=False)
    groups = _pool_groups(plan)
    assert len(plan.groups) == 2 and plan.fully_covered
    assert _ops(plan, groups[0]) == ["max_pool2d_with_indices", "getitem", "getitem", "sub", "relu"]
    assert len(groups[0].outputs) == 2  # the indices and the relu
    assert verdict.status is Status.PASSED, verdict.message
    if config_index == 0:
        assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


def test_avg_pool_2d_options_and_one_dimensional(check) -> None:
    # ceil_mode's clipped last window without the padding counted, a divisor_override, and the default
    # (count_include_pad) with padding; 1-D max and average pooling, which core aten writes as an unsqueeze and
    # the 2-D operator with a kernel of height 1. Five groups, one kernel each.
    plan, verdict = check("avg2d_1d", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.max1d = nn.MaxPool1d(4, stride=3, padding=2, dilation=2, ceil_mode=True)
                self.avg1d = nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False)

            def forward(self, x, s):
                return (F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                        F.avg_pool2d(x, (2, 3), stride=(1, 2), divisor_override=5),
                        F.avg_pool2d(x, 3, stride=2, padding=1),
                        self.max1d(s), self.avg1d(s))

        batch = 2
        height = 7
        width = 9
        length = 19

        def get_inputs():
            return [torch.randn(batch, 3, height, width), torch.randn(batch, 1, length)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert [g.family for g in plan.groups] == ["pool"] * 5 and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_three_dimensional_epilogue_and_prologue(check) -> None:
    # A 3-D max pooling with ceil_mode; a 3-D average pooling (anisotropic stride and padding) whose epilogue reads
    # a per-channel parameter through its strides; and, where windows do not overlap (stride = kernel), the
    # per-channel scale and leaky_relu producing the pooled tensor computed at each tap (never written), relu after.
    plan, verdict = check("pool3d", """
        class Model(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.scale = nn.Parameter(torch.randn(channels, 1, 1, 1))

            def forward(self, x, y):
                a = F.max_pool3d(x, 3, stride=2, padding=1, ceil_mode=True)
                b = F.avg_pool3d(x, 2, stride=(1, 2, 2), padding=(0, 1, 1), count_include_pad=False)
                c = F.max_pool3d(F.leaky_relu(y * self.scale, 0.2), 2, ceil_mode=True)
                return a, torch.sigmoid(b * self.scale + 1.0), torch.relu(c)

        depth = 5
        height = 7
        width = 9

        def get_inputs():
            return [torch.randn(2, 3, depth, height, width), torch.randn(2, 3, depth, height, 3)]

        def get_init_inputs():
            return [3]
    """, distribution_trials=False)
    groups = _pool_groups(plan)
    assert len(plan.groups) == 3 and plan.fully_covered
    assert _ops(plan, groups[1]) == ["avg_pool3d", "mul", "add", "sigmoid"]
    assert _ops(plan, groups[2]) == ["mul", "leaky_relu", "max_pool3d_with_indices", "getitem", "relu"]
    assert verdict.status is Status.PASSED, verdict.message


def test_plans_what_it_does_not_claim(tmp_path) -> None:
    # A node that needs both the values and the indices is left to another group (it would make the pooling
    # group wait on itself); a prologue is not recomputed under overlapping windows; adaptive average pooling to
    # another size than 1 is left to PyTorch.
    problem = write_problem(tmp_path, "refused", """
        class Model(nn.Module):
            def forward(self, x):
                values, indices = F.max_pool2d(x, 2, return_indices=True)
                return values + indices, F.max_pool2d(torch.tanh(x), 3, stride=1), F.adaptive_avg_pool2d(x, (3, 2))

        def get_inputs():
            return [torch.randn(2, 3, 8, 6)]

        def get_init_inputs():
            return []
    """)
    plan = make_plan(capture(problem))
    groups = _pool_groups(plan)
    assert [_ops(plan, g) for g in groups] == [["max_pool2d_with_indices", "getitem", "getitem"],
                                               ["max_pool2d_with_indices", "getitem"]]
    assert "aten._adaptive_avg_pool2d" in plan.describe()[-1]


ROWS = {"variant": "rows", "BLOCK": 32, "num_warps": 4}


@pytest.mark.instructions
@pytest.mark.slow
def test_average_pooling_as_rows_of_window_taps(check, tmp_path) -> None:
    """The rows variant (issue 29 item 4): a window's last dimension is a tile axis, so a warp reads consecutive
    input along a row instead of one tap a lane, ``stride`` apart. Non-overlapping 11 x 11 windows (KernelBench's
    45_Average_Pooling_2D at a small size: 16 taps a row, 5 masked), padding with ceil_mode and the divisor
    clipped, an anisotropic 3-D pooling whose epilogue reads a per-channel parameter, and a divisor_override; a
    second shape changes every size."""
    plan, verdict = check("avg_rows", """
        class Model(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.scale = nn.Parameter(torch.randn(channels, 1, 1, 1))

            def forward(self, x, y):
                return (F.avg_pool2d(x, 11),
                        F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                        torch.sigmoid(F.avg_pool3d(y, (2, 3, 5), stride=(1, 2, 5), padding=(0, 1, 2)) * self.scale),
                        F.avg_pool2d(x, (2, 4), divisor_override=3))

        batch = 2
        height = 23
        width = 35

        def get_inputs():
            return [torch.randn(batch, 3, height, width), torch.randn(batch, 3, 5, 7, width)]

        def get_init_inputs():
            return [3]
    """, config_overrides=ROWS, distribution_trials=False)
    assert [g.family for g in plan.groups] == ["pool"] * 4 and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    source = (tmp_path / "avg_rows_candidate.py").read_text()
    assert "taps = tl.arange(0, 16)" in source and "tl.sum(v, axis=1)" in source
    compiled = {k.name for k in verdict.instructions if k.arch == "sm_90a"}
    assert len(compiled) == 4, compiled  # each kernel cross-compiled for Hopper


def test_rows_lead_where_a_lane_per_output_would_gather(tmp_path) -> None:
    from kernelwright.generate.families.pool import PoolFamily

    problem = write_problem(tmp_path, "pools", """
        class Model(nn.Module):
            def forward(self, x):
                return F.avg_pool2d(x, 11), F.avg_pool2d(x, 3, stride=1), F.max_pool2d(x, 11)

        def get_inputs():
            return [torch.randn(1, 2, 33, 33)]

        def get_init_inputs():
            return []
    """)
    the_plan = make_plan(capture(problem))
    wide, narrow, maximum = (PoolFamily().space(the_plan.graph, g, "sm_90a") for g in _pool_groups(the_plan))
    assert wide[0] == {"variant": "rows", "BLOCK": 128, "num_warps": 4}  # 44-byte gathers: rows first
    assert narrow[0].get("variant", "lanes") == "lanes" and narrow[-1]["variant"] == "rows"  # stride 1: coalesced
    assert maximum[0]["variant"] == "rows"  # max pooling without indices too


@pytest.mark.slow
def test_max_pooling_as_rows_keeps_nan_and_padding(check, tmp_path) -> None:
    """Max pooling in the rows variant: NaN propagates (a reduction's maximum would drop it), padding and ceil_mode
    windows with taps outside the input count as -inf, dilation spreads a row's taps; with indices it stays a lane
    an output (the rows variant refuses it)."""
    plan, verdict = check("max_rows", """
        class Model(nn.Module):
            def forward(self, x):
                return (F.max_pool2d(x, 5), F.max_pool2d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True),
                        F.max_pool3d(x.unsqueeze(1), (1, 2, 7), stride=(1, 1, 7)))

        def get_inputs():
            x = torch.randn(2, 3, 13, 29)
            x.view(-1)[::41] = float("nan")
            return [x]

        def get_init_inputs():
            return []
    """, config_overrides=ROWS, distribution_trials=False)
    assert [g.family for g in plan.groups].count("pool") == 3
    assert verdict.status is Status.PASSED, verdict.message
    assert "tl.max((v != v)" in (tmp_path / "max_rows_candidate.py").read_text()
