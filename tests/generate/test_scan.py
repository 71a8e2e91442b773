"""Family 3: cumsum and cumprod along the last and an inner dimension, proven under the interpreter on small and
odd shapes, with fused prologues and epilogues, carries across tiles, and integer and half inputs."""

from __future__ import annotations

import pytest

from kernelwright.records import Status


def _families(plan) -> list[str]:
    return [g.family for g in plan.groups]


def _scan_groups(plan):
    return [g for g in plan.groups if g.family == "scan"]


@pytest.mark.slow
def test_cumsum_rows_carried_across_tiles_and_second_shape(check) -> None:
    # 2500 columns under the default BLOCK of 1024: three tiles per row, the running total carried twice.
    plan, verdict = check("cumsum_rows", """
        class Model(nn.Module):
            def forward(self, x):
                return torch.cumsum(x, dim=-1)

        rows = 17
        cols = 2500

        def get_inputs():
            return [torch.randn(rows, cols)]

        def get_init_inputs():
            return []
    """)
    assert _families(plan) == ["scan"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


@pytest.mark.slow
def test_cumprod_with_prologue_and_epilogue_two_tiles(check) -> None:
    # Config 4 (BLOCK 512) splits the 1000 columns into two tiles: the running product crosses a tile edge.
    plan, verdict = check("cumprod_fused", """
        class Model(nn.Module):
            def forward(self, x, y):
                return torch.sigmoid(torch.cumprod(1.0 + 0.05 * x, dim=1) - y)

        def get_inputs():
            return [torch.randn(7, 1000), torch.randn(7, 1000)]

        def get_init_inputs():
            return []
    """, config_index=4, distribution_trials=False)
    assert _families(plan) == ["scan"] and plan.fully_covered
    assert len(_scan_groups(plan)[0].nodes) == 5  # mul, add, cumprod, sub, sigmoid
    assert verdict.status is Status.PASSED, verdict.message


def test_int32_to_int64_and_bf16_with_fp32_accumulation(check) -> None:
    # cumsum of int32 is int64 (exact); a bf16 cumsum over 1000 steps accumulates in fp32. The int rows are
    # 7 long, so many rows share a program.
    plan, verdict = check("cumsum_int_bf16", """
        class Model(nn.Module):
            def forward(self, x, y):
                return torch.cumsum(x, dim=1) * 3, torch.cumsum(y, dim=-1)

        def get_inputs():
            return [torch.randint(-1000, 1000, (127, 7), dtype=torch.int32),
                    torch.randn(5, 1000, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert _families(plan) == ["scan", "scan"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 2, 99])
def test_inner_dim_cumsum_with_broadcast_prologue(check, config_index: int) -> None:
    # Config 2 (COLS 16, BLOCK 1024) gives two column blocks per outer index (20 columns, masked) and two tiles
    # down the 127 steps (64 each): both the masking and the carried total are exercised. 99, the last: the loop
    # pipelined four stages deep (tl.range), 32 steps a tile.
    plan, verdict = check(f"cumsum_inner_{config_index}", """
        class Model(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(features))

            def forward(self, x):
                return torch.relu(torch.cumsum(x * self.weight, dim=1))

        def get_inputs():
            return [torch.randn(3, 127, 20)]

        def get_init_inputs():
            return [20]
    """, config_index=config_index, distribution_trials=False)
    assert _families(plan) == ["scan"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_transposed_input_and_one_dimensional_scan(check) -> None:
    # A non-contiguous operand (read through its strides along the scan) and a rank-1 cumprod; the first dim of
    # a [1, 7] view and a single row stress the size-1 paths.
    plan, verdict = check("scan_strided", """
        class Model(nn.Module):
            def forward(self, x, v):
                return torch.cumsum(x.t(), dim=-1), torch.cumprod(v, dim=0), torch.cumsum(x[:1, :7], dim=0)

        def get_inputs():
            return [torch.randn(40, 33), 1.0 + 0.01 * torch.randn(1000)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert _families(plan).count("scan") == 3
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_permuted_rank4_input_indexes_every_outer_dimension(check) -> None:
    # A [2, 3, 4, 5] permuted view scanned along its last dim: the row index splits over three outer dimensions,
    # (rows // (size_2 * size_1)) for the first — written without the parentheses it read out of bounds (level 3's
    # Mamba2, whose A parameter is scanned this way); a second scan along dim 1 splits the inner index too.
    plan, verdict = check("scan_rank4", """
        class Model(nn.Module):
            def forward(self, x):
                y = x.permute(0, 3, 1, 2)
                return torch.cumsum(y, dim=-1), torch.cumsum(y, dim=1)

        def get_inputs():
            return [torch.randn(3, 4, 6, 5)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert _families(plan).count("scan") == 2
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_reverse_scans_from_flips_rows_and_columns(check) -> None:
    # flip(cumsum(flip(x, [d]), d), [d]) — KernelBench's reverse cumsum — is one scan walking the dimension from its
    # end (the flips are never materialised): along the last dimension over three tiles (1,100 columns in config 4's
    # 512-element tiles: the last one partial, scanned first), along an inner dimension with an epilogue, and a
    # reverse cumprod.
    plan, verdict = check("reverse_scans", """
        class Model(nn.Module):
            def forward(self, x, y, z):
                a = torch.cumsum(x.flip(1), 1).flip(1)
                b = torch.cumsum(y.flip(0), dim=0).flip(0) * 2.0
                c = torch.cumprod(z.flip(-1), -1).flip(-1)
                return a, b, c

        def get_inputs():
            return [torch.randn(3, 1100), torch.randn(70, 3, 9), torch.rand(4, 13) + 0.5]

        def get_init_inputs():
            return []
    """, config_index=4, distribution_trials=False)
    assert [g.family for g in plan.groups] == ["scan"] * 3 and plan.fully_covered
    assert all(len(g.detail["flips"]) == 2 for g in plan.groups)
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_exclusive_scans_read_the_source_one_step_behind(check) -> None:
    # cat([identity, scan(x[..., :-1])]) — KernelBench's exclusive cumsum — is one scan reading x one step behind
    # with the identity in front: nothing is sliced, filled or concatenated. Along the last dimension over three
    # tiles (1,100 columns in 512-element tiles) with an epilogue after the cat, along an inner dimension, and an
    # exclusive cumprod (its identity is 1); a second shape.
    plan, verdict = check("exclusive_scans", """
        class Model(nn.Module):
            def forward(self, x, y, z):
                a = torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), torch.cumsum(x[:, :-1], dim=1)), 1)
                head = torch.zeros_like(y.select(0, 0).unsqueeze(0))
                b = torch.cat((head, torch.cumsum(y.narrow(0, 0, y.size(0) - 1), dim=0)), dim=0)
                c = torch.cat((torch.ones_like(z[:, :1]), torch.cumprod(z[:, :-1], -1)), -1)
                return a * 0.5, b, c

        rows = 3
        cols = 1100

        def get_inputs():
            return [torch.randn(rows, cols), torch.randn(70, 3, 9), torch.rand(4, 13) + 0.5]

        def get_init_inputs():
            return []
    """, config_index=4)
    assert [g.family for g in plan.groups] == ["scan"] * 3 and plan.fully_covered
    assert all(g.detail["exclusive"] for g in plan.groups)
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


def test_an_exclusive_scan_whose_scan_is_also_returned_is_not_shifted(tmp_path) -> None:
    # The kernel would store the shifted scan, at the cat's shape, into the scan's own output.
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import plan

    from .conftest import write_problem

    path = write_problem(tmp_path, "exclusive_and_inclusive", """
        class Model(nn.Module):
            def forward(self, x):
                c = torch.cumsum(x[:, :-1], 1)
                return torch.cat((torch.zeros_like(x[:, :1]), c), 1), c

        def get_inputs():
            return [torch.randn(6, 40)]

        def get_init_inputs():
            return []
    """)
    the_plan = plan(capture(path))
    assert not any(g.detail.get("exclusive") for g in the_plan.groups)
