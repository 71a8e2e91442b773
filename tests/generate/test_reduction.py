"""Family 2: reductions (softmax, norms, sums, extrema with indices, cross-entropy), proven under the interpreter.

Each ``check`` verifies the generated candidate end to end on the CPU. ``config_index=1`` is the other strategy
than the default (rows in chunks where the default holds a row in registers), with a loop chunk a quarter of a
small row — so several chunks, the online softmax, the Welford merge and the per-lane argmax bookkeeping all run;
``config_index=2`` is strategy split where a group allows it (partial results per share of a row, then a merge).
"""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.generate.families.reduction import ReductionFamily
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import plan as make_plan
from kernelwright.records import Status


def _families(plan) -> list[str]:
    return [g.family for g in plan.groups]


def _assert_compiled(verdict) -> None:
    """The kernels also compiled for sm_90a (the verifier cross-compiles them for their instruction summary)."""
    assert not verdict.has_finding("cross-compile-failed"), [f.message for f in verdict.findings]
    assert verdict.instructions and all(i.arch == "sm_90a" for i in verdict.instructions)


@pytest.mark.instructions
@pytest.mark.slow
def test_softmax_in_registers_with_every_trial(check) -> None:
    plan, verdict = check("softmax_rows", """
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1)

        rows = 33
        cols = 127

        def get_inputs():
            return [torch.randn(rows, cols) * 3.0]

        def get_init_inputs():
            return []
    """)
    assert _families(plan) == ["reduction"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    assert any(t.kind == "heavy_tailed" and t.status == "ok" for t in verdict.trials)
    _assert_compiled(verdict)


@pytest.mark.instructions
@pytest.mark.slow
def test_log_softmax_bf16_and_cross_entropy_in_chunks(check) -> None:
    # Cross-entropy: _log_softmax, then gather at the target, neg, and where(target != ignore_index); only the
    # per-row loss is written (the log-probabilities never reach memory).
    plan, verdict = check("ce_chunks", """
        class Model(nn.Module):
            def forward(self, x, logits, targets):
                return torch.log_softmax(x, dim=-1), F.cross_entropy(logits, targets, reduction="none")

        batch = 7
        vocab = 1000

        def get_inputs():
            targets = torch.randint(0, vocab, (batch,))
            targets[::3] = -100
            return [torch.randn(batch, vocab, dtype=torch.bfloat16) * 2.0, torch.randn(batch, vocab) * 2.0, targets]

        def get_init_inputs():
            return []
    """, config_index=1, distribution_trials=False)
    assert _families(plan) == ["reduction", "reduction"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    _assert_compiled(verdict)


@pytest.mark.slow
def test_layernorm_residual_bf16_welford_in_chunks(check) -> None:
    plan, verdict = check("layernorm_residual", """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.LayerNorm(dim, eps=1e-5, dtype=torch.bfloat16)
                nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
                nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

            def forward(self, x, residual):
                return self.norm(x + residual)

        tokens = 7
        dim = 1000

        def get_inputs():
            # a trend along the row: chunk means differ, so the Welford merge's between-chunk term matters
            x = torch.randn(tokens, dim) * 3.0 + torch.linspace(-8.0, 8.0, dim)
            return [x.to(torch.bfloat16), torch.randn(tokens, dim, dtype=torch.bfloat16)]

        def get_init_inputs():
            return [dim]
    """, config_index=1, distribution_trials=False)
    assert _families(plan) == ["reduction"] and plan.fully_covered  # the residual add is the prologue
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_whole_rows_in_registers_layernorm_argmax_column_min(check) -> None:
    # Strategy single (the default for short rows): LayerNorm over two dims with a GELU epilogue, argmax with ties
    # (the first maximal index wins) and a column minimum with its indices (a strided dim, whole in registers).
    plan, verdict = check("single_mix", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm([4, 25])
                nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
                nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

            def forward(self, x, a, y):
                m = torch.min(y, dim=0)
                return F.gelu(self.norm(x)) * 2.0, torch.argmax(a, dim=-1), m.values, m.indices

        batch = 6
        rows = 33
        cols = 1000

        def get_inputs():
            x = torch.randn(batch, 4, 25) * 3.0 + 1.0
            a = torch.randint(0, 50, (rows, cols)).float()
            y = torch.randint(-3, 4, (cols // 8, rows // 4)).float()
            return [x, a, y]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert _families(plan) == ["reduction"] * 3 and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_rmsnorm_fp16_pattern_is_one_kernel(check) -> None:
    plan, verdict = check("rmsnorm", """
        class Model(nn.Module):
            def __init__(self, dim, eps):
                super().__init__()
                self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(dim, dtype=torch.float16))
                self.eps = eps

            def forward(self, x):
                xf = x.float()
                y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
                return (y * self.weight.float()).to(x.dtype)

        batch = 9
        dim = 127

        def get_inputs():
            return [torch.randn(batch, dim, dtype=torch.float16)]

        def get_init_inputs():
            return [dim, 1e-6]
    """, distribution_trials=False)
    assert _families(plan) == ["reduction"] and plan.fully_covered
    assert len(plan.groups[0].nodes) == 9  # casts, pow, mean, add, rsqrt, both muls, the final cast
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_groupnorm_silu_in_chunks(check) -> None:
    plan, verdict = check("groupnorm_silu", """
        class Model(nn.Module):
            def __init__(self, groups, channels):
                super().__init__()
                self.norm = nn.GroupNorm(groups, channels, eps=1e-5)
                nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
                nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

            def forward(self, x):
                return F.silu(self.norm(x))

        batch = 3
        groups = 4
        channels = 8
        height = 5
        width = 7

        def get_inputs():
            return [torch.randn(batch, channels, height, width) * 2.0 + 0.5]

        def get_init_inputs():
            return [groups, channels]
    """, config_index=1, distribution_trials=False)
    assert _families(plan) == ["reduction"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_hand_written_softmax_is_one_kernel_of_three_passes(check) -> None:
    plan, verdict = check("manual_softmax", """
        class Model(nn.Module):
            def forward(self, x):
                shifted = x - torch.amax(x, dim=-1, keepdim=True)
                e = torch.exp(shifted)
                return e / torch.sum(e, dim=-1, keepdim=True)

        rows = 7
        cols = 1000

        def get_inputs():
            return [torch.randn(rows, cols) * 4.0]

        def get_init_inputs():
            return []
    """, config_index=1, distribution_trials=False)
    assert _families(plan) == ["reduction"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.instructions
@pytest.mark.slow
def test_strided_and_multi_dim_reductions_in_chunks(check) -> None:
    # Strategy loop: min over dim 0 of integer-valued data (ties in every lane across chunks: PyTorch returns the
    # first index), sum over a middle dim (strided), over a middle dim of size 1, mean over (H, W) of bf16 (short
    # rows, many per program), the 2-norm of rows.
    plan, verdict = check("strided_mix", """
        class Model(nn.Module):
            def forward(self, x, y, z, w):
                m = torch.min(y, dim=0)
                return (torch.sum(x, dim=1), m.values, m.indices, torch.mean(z, dim=(2, 3)),
                        torch.linalg.vector_norm(w, ord=2, dim=-1), torch.sum(w[:, None, :], dim=1))

        batch = 3
        seq = 100
        features = 20
        rows = 127
        cols = 7

        def get_inputs():
            x = torch.randn(batch, seq, features)
            y = torch.randint(-3, 4, (rows, cols)).float()
            z = torch.randn(batch, 6, 7, 7, dtype=torch.bfloat16)
            w = torch.randn(rows, features) * (0.1 + torch.rand(rows, 1))
            return [x, y, z, w]

        def get_init_inputs():
            return []
    """, config_index=1, distribution_trials=False)
    assert _families(plan) == ["reduction"] * 5 and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    _assert_compiled(verdict)


@pytest.mark.instructions
@pytest.mark.slow
def test_split_rows_then_merge(check) -> None:
    # Strategy split (config 2 here): each row is cut into shares reduced by separate programs, whose partial
    # results a second kernel merges — min with first-index ties, argmax with ties plus amax (siblings: one read of
    # z), sum plus var_mean (a sibling Welford merge), the cross-entropy gather after the merge, and one row alone.
    plan, verdict = check("split_merge", """
        class Model(nn.Module):
            def forward(self, x, y, z, logits, targets, h):
                m = torch.min(y, dim=0)
                return (torch.sum(x, dim=1), torch.var_mean(x, dim=1)[0], m.values, m.indices,
                        torch.argmax(z, dim=-1), torch.amax(z, dim=-1),
                        F.cross_entropy(logits, targets, reduction="none"), torch.amax(h, dim=-1))

        batch = 3
        seq = 100
        features = 20
        rows = 127
        cols = 7

        def get_inputs():
            x = torch.randn(batch, seq, features) + 2.0
            y = torch.randint(-3, 4, (rows, cols)).float()  # ties: the first index wins
            z = torch.randint(0, 20, (cols, rows * 8)).float()
            targets = torch.randint(0, rows, (cols,))
            targets[1] = -100
            return [x, y, z, torch.randn(cols, rows) * 2.0, targets, torch.randn(1, rows * 8, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """, config_index=2, distribution_trials=False)
    assert _families(plan) == ["reduction"] * 5 and plan.fully_covered
    assert [len(g.nodes) for g in plan.groups][:3] == [3, 3, 2]  # min+getitems, sum+var_mean+getitem, argmax+amax
    assert verdict.status is Status.PASSED, verdict.message
    assert sum("partial" in i.name for i in verdict.instructions) == 5
    _assert_compiled(verdict)


@pytest.mark.slow
def test_pipelined_loops_keep_the_results(check, tmp_path) -> None:
    # A configuration's `stages` walks the reduced dim with Triton's software-pipelined tl.range (the interpreter
    # runs it as a plain loop): the strided split (min over dim 0, 200 columns: the wide split is first) and a
    # row loop (rows past 16K elements walk in chunks by default), with masked tails in both.
    plan, verdict = check("pipelined", """
        class Model(nn.Module):
            def forward(self, x, y):
                return torch.min(x, dim=0).values, torch.sum(y, dim=-1)

        def get_inputs():
            return [torch.randn(300, 200), torch.randn(5, 20000)]

        def get_init_inputs():
            return []
    """, config_overrides={"stages": 3}, distribution_trials=False)
    assert _families(plan) == ["reduction"] * 2 and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    source = (tmp_path / "pipelined_candidate.py").read_text()
    assert source.count("num_stages=3):") == 2 and "kw_reduction_0_partial_kernel" in source


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 2])
def test_integer_sums_count_exactly_in_int64(check, config_index: int) -> None:
    # A sum of a mask or of integers is int64 in PyTorch (cross-entropy's mean divides by the count of targets
    # that are not ignored: level 1 `95_CrossEntropyLoss`); counted in int64, never in fp32 (exact only to 2**24).
    # Config 2 splits the rows and merges the shares' integer partial sums.
    plan, verdict = check(f"counts_{config_index}", """
        class Model(nn.Module):
            def forward(self, x, t, i):
                kept = (t != -100).sum()
                return (x > 0).sum(dim=1), i.sum(dim=-1), x.sum() / kept.to(torch.float32)

        rows = 5
        cols = 300

        def get_inputs():
            t = torch.randint(0, 4, (cols,))
            t[::3] = -100
            return [torch.randn(rows, cols), t, torch.randint(-2**40, 2**40, (rows, cols))]

        def get_init_inputs():
            return []
    """, config_index=config_index, distribution_trials=False)
    assert set(_families(plan)) == {"reduction"} and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message


def test_any_all_and_a_filled_like_tensor_fuse(check) -> None:
    # SDPA written out (level 1 `97_ScaledDotProductAttention`) guards rows whose scores are all -inf with
    # where(~any(~(s == -inf), -1, keepdim), full_like(p, 0), p): any/all reduce as the max/min of x != 0, and
    # full_like is a constant the kernel writes (before, both stayed in PyTorch: a 268 MB fill of zeros).
    plan, verdict = check("any_all", """
        class Model(nn.Module):
            def forward(self, x):
                rows_with_positive = torch.any(x > 1.0, dim=-1, keepdim=True)
                guarded = torch.where(rows_with_positive, x, torch.zeros_like(x))
                return guarded, torch.all(x > -2.0, dim=0)

        rows = 9
        cols = 300

        def get_inputs():
            return [torch.randn(rows, cols) * 0.6]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert set(_families(plan)) == {"reduction"} and plan.fully_covered
    assert "full_like" in {plan.graph.node(n).op for g in plan.groups for n in g.nodes}
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


def _plan_of(tmp_path, body: str):
    path = tmp_path / "unclaimed.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body).strip() + "\n")
    graph = capture(path)
    return graph, make_plan(graph, [ReductionFamily()])


def test_what_stays_in_pytorch(tmp_path) -> None:
    # Reduced dims that are not contiguous, an integer input, and a p-norm without an exact template.
    _, plan = _plan_of(tmp_path, """
        class Model(nn.Module):
            def forward(self, x, i, w):
                return torch.sum(x, dim=(0, 2)), torch.argmax(i, dim=-1), torch.linalg.vector_norm(w, ord=3, dim=-1)

        def get_inputs():
            return [torch.randn(4, 5, 6), torch.randint(0, 9, (4, 5)), torch.randn(4, 5)]

        def get_init_inputs():
            return []
    """)
    assert not plan.groups
    assert sorted(plan.graph.node(n).op for n in plan.uncovered) == ["argmax", "linalg_vector_norm", "sum"]


def test_space_default_first_and_the_other_strategy_second(tmp_path) -> None:
    graph, plan = _plan_of(tmp_path, """
        class Model(nn.Module):
            def forward(self, x, y, z):
                return torch.softmax(x, dim=-1), torch.log_softmax(y, dim=-1), torch.sum(z, dim=1)

        def get_inputs():
            return [torch.randn(512, 8192), torch.randn(512, 32000, dtype=torch.bfloat16), torch.randn(4, 8192, 8)]

        def get_init_inputs():
            return []
    """)
    family = ReductionFamily()
    short, long, few = (family.space(graph, g, "sm_90a") for g in plan.groups)
    assert short[0]["strategy"] == "single" and short[1]["strategy"] == "loop"  # an 8192-row fits in registers
    assert long[0]["strategy"] == "loop" and long[1]["strategy"] == "single"  # 32000 is walked in chunks
    assert "split" not in {c["strategy"] for c in short}  # softmax writes full rows: one program per row
    assert few[0]["strategy"] == "split"  # 32 outputs of 8192 terms: shares of rows keep the SMs busy
    for space in (short, long, few):
        assert all(1 <= c["num_warps"] <= 32 for c in space)
        assert len({tuple(sorted(c.items())) for c in space}) == len(space)  # no config twice


@pytest.mark.slow
def test_a_run_time_size_in_the_epilogue_is_not_baked_in(check) -> None:
    # `* x.shape[-1]` is a symbol of the capture: a kernel that absorbed it as the captured 40 would be wrong at
    # every other shape (the second-shape trial saw it: a layer-norm backward graph came out wrong at reduced
    # sizes). The reduction leaves it; the pointwise family takes the sizes as kernel arguments, computed from the
    # tensors by the forward (level 1 `98_KLDivLoss` divides by the batch size).
    plan, verdict = check("size_scaled", """
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1) * x.shape[-1] - x.shape[0]

        rows = 6
        cols = 40

        def get_inputs():
            return [torch.randn(rows, cols)]

        def get_init_inputs():
            return []
    """)
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    assert _families(plan) == ["reduction", "pointwise"] and plan.fully_covered
    (sized,) = [g for g in plan.groups if g.family == "pointwise"]
    assert sorted(plan.graph.node(n).op for n in sized.nodes) == ["mul", "sub"]
    assert len(sized.detail["sizes"]) == 2  # x.shape[-1] and x.shape[0], read when the forward runs
