"""Family 5: attention (FlashAttention-2 style), proven under the interpreter on small and odd shapes; the claims
checked on the realistic problems and on what must be left to PyTorch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.generate.conftest import write_problem

from kernelwright.generate.families.attention import AttentionFamily
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import plan
from kernelwright.hardware import arch_spec
from kernelwright.records import Status

PROBLEMS = Path(__file__).resolve().parents[2] / "problems"


def _families(the_plan) -> list[str]:
    return [g.family for g in the_plan.groups]


def _attention(the_plan):
    groups = [g for g in the_plan.groups if g.family == "attention"]
    assert len(groups) == 1, the_plan.describe()
    return groups[0]


def _sm90_opcodes(verdict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for summary in verdict.instructions:
        if summary.arch.startswith("sm_90"):
            for op, n in summary.histogram_by_opcode.items():
                counts[op] = counts.get(op, 0) + n
    return counts


@pytest.mark.instructions
@pytest.mark.slow
def test_causal_matmul_mask_softmax_matmul_fp16(check) -> None:
    # The written-out form of problems/attention_causal_fp16.py, small: seq 100 is not a multiple of any block,
    # so the causal diagonal and the sequence tail share the masked loop; the shape trial moves every size
    # (head_dim 32 -> 27 exercises the padded head dim and the run-time 1/sqrt(head_dim)).
    the_plan, verdict = check("causal_fp16", """
        class Model(nn.Module):
            def forward(self, q, k, v):
                length = q.shape[-2]
                scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
                mask = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
                return torch.matmul(torch.softmax(scores, dim=-1), v)

        batch = 2
        heads = 2
        seq = 100
        head_dim = 32

        def get_inputs():
            shape = (batch, heads, seq, head_dim)
            return [torch.randn(shape, dtype=torch.float16) * 2.0, torch.randn(shape, dtype=torch.float16),
                    torch.randn(shape, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """)
    assert _families(the_plan) == ["attention"] and the_plan.fully_covered
    assert _attention(the_plan).detail["causal"] is True
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    assert any(op.startswith("HGMMA") for op in _sm90_opcodes(verdict)), _sm90_opcodes(verdict)


@pytest.mark.instructions
@pytest.mark.slow
def test_sdpa_bf16_cross_attention_odd_lengths(check) -> None:
    # SDPA as captured on the CPU (its math decomposition: upcasts, sqrt(scale) on q and k, the all-masked-row
    # fix-up, the output's permute/clone); 7 queries against 127 keys, head_dim 64.
    the_plan, verdict = check("sdpa_bf16", """
        class Model(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v)

        batch = 2
        heads = 3
        seq_q = 7
        seq_k = 127
        head_dim = 64

        def get_inputs():
            return [torch.randn(batch, heads, seq_q, head_dim, dtype=torch.bfloat16) * 2.0,
                    torch.randn(batch, heads, seq_k, head_dim, dtype=torch.bfloat16),
                    torch.randn(batch, heads, seq_k, head_dim, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """, config_index=1, distribution_trials=False)  # the TMA variant
    group = _attention(the_plan)
    assert the_plan.fully_covered
    assert group.detail["causal"] is False and group.detail["zero_empty_rows"] is True
    assert group.detail["qk_dtype"] == torch.bfloat16  # the fp32 upcast is exact: bf16 operands, tensor cores
    assert verdict.status is Status.PASSED, verdict.message
    assert any(op.startswith("HGMMA") and "BF16" in op for op in _sm90_opcodes(verdict)), _sm90_opcodes(verdict)
    # The second on Hopper: q, k, v fetched by TMA through rank-4 descriptors (127 keys: the last block
    # zero-filled past the sequence, then masked).
    assert "UTMALDG.4D" in _sm90_opcodes(verdict), _sm90_opcodes(verdict)


@pytest.mark.slow
def test_sdpa_causal_on_strided_views_second_config(check) -> None:
    # q, k, v arrive as [batch, seq, heads, dim] and are transposed: the kernel reads them through their strides
    # (nothing is copied) and writes the [seq, batch, heads, dim] layout SDPA's output has. A non-default config.
    the_plan, verdict = check("sdpa_causal_views", """
        class Model(nn.Module):
            def forward(self, q, k, v):
                y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                   is_causal=True)
                return y.transpose(1, 2)

        batch = 2
        seq = 127
        heads = 2
        head_dim = 16

        def get_inputs():
            shape = (batch, seq, heads, head_dim)
            return [torch.randn(shape, dtype=torch.float16) * 2.0, torch.randn(shape, dtype=torch.float16),
                    torch.randn(shape, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """, config_index=3, distribution_trials=False)  # the pointer kernel's third tile
    group = _attention(the_plan)
    assert group.detail["causal"] is True and group.detail["q_perm"] == (0, 2, 1, 3)
    assert group.detail["out_perm"] is not None
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


@pytest.mark.slow
def test_fp32_bmm_keeps_ieee_precision_and_a_fixed_scale(check, tmp_path: Path) -> None:
    # 3-D torch.bmm, one query row against 1000 keys, fp32: the dots stay fp32 (input_precision="ieee"); the
    # scale 1/3 is a constant of the problem, not 1/sqrt(head_dim), and stays one at the second shape.
    the_plan, verdict = check("fp32_bmm", """
        class Model(nn.Module):
            def forward(self, q, k, v):
                scores = torch.bmm(q, k.transpose(1, 2)) / 3.0
                return torch.bmm(torch.softmax(scores, dim=-1), v)

        groups = 2
        seq_q = 1
        seq_k = 1000
        head_dim = 16

        def get_inputs():
            return [torch.randn(groups, seq_q, head_dim), torch.randn(groups, seq_k, head_dim),
                    torch.randn(groups, seq_k, head_dim)]

        def get_init_inputs():
            return []
    """, config_index=1, distribution_trials=False)
    group = _attention(the_plan)
    assert group.detail["scale"] == pytest.approx(1 / 3) and group.detail["batch_rank"] == 1
    source = (tmp_path / "fp32_bmm_candidate.py").read_text()
    assert source.count('input_precision="ieee"') == 2
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(f.code in ("tf32-in-fp32", "fp16-in-fp32") for f in verdict.findings)


def test_sdpa_operator_form(check, monkeypatch) -> None:
    # Captured without decompositions, SDPA stays one aten operator (as a GPU export shows the fused ones); its
    # arguments decide: is_causal, an explicit scale.
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", lambda self, *a, **k: self)
    the_plan, verdict = check("sdpa_op", """
        class Model(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)

        batch = 2
        heads = 3
        seq = 33
        head_dim = 16

        def get_inputs():
            shape = (batch, heads, seq, head_dim)
            return [torch.randn(shape, dtype=torch.float16) for _ in range(3)]

        def get_init_inputs():
            return []
    """, distribution_trials=False, shape_trial=False)
    group = _attention(the_plan)
    assert group.detail["form"] == "sdpa" and group.detail["causal"] is True and group.detail["scale"] == 0.3
    assert verdict.status is Status.PASSED, verdict.message


# --------------------------------------------------------------------------------------------------------------
# Claims only (no verification): which graphs the family takes, and what it leaves to PyTorch.


def _plan_of(tmp_path: Path, name: str, forward: str, *, seq_k: int = 12):
    body = "import math\n\nclass Model(nn.Module):\n    def forward(self, q, k, v):\n"
    body += "".join(f"        {line.strip()}\n" for line in forward.strip().splitlines())
    body += f"""
seq_q = 12
seq_k = {seq_k}

def get_inputs():
    return [torch.randn(2, 3, seq_q, 16), torch.randn(2, 3, seq_k, 16), torch.randn(2, 3, seq_k, 16)]

def get_init_inputs():
    return []
"""
    return plan(capture(write_problem(tmp_path, name, body)))


@pytest.mark.parametrize("name, forward, seq_k", [
    ("tril_float_eq_zero", """
        s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        m = torch.tril(torch.ones(q.size(-2), k.size(-2)))
        return torch.softmax(s.masked_fill(m == 0, float("-inf")), -1) @ v""", 12),
    ("tril_bool_longer_keys", """
        m = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril()
        return torch.softmax((q @ k.transpose(-2, -1)).masked_fill(~m, float("-inf")), -1) @ v""", 20),
    ("sdpa_bool_causal_mask", """
        m = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)""", 12),
])
def test_causal_masks_are_recognised(tmp_path: Path, name: str, forward: str, seq_k: int) -> None:
    group = _attention(_plan_of(tmp_path, name, forward, seq_k=seq_k))
    assert group.detail["causal"] is True


@pytest.mark.parametrize("name, forward", [
    ("triu_diagonal_2", """
        m = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).triu(2)
        return torch.softmax((q @ k.transpose(-2, -1)).masked_fill(m, float("-inf")), -1) @ v"""),
    ("tril_diagonal_1", """
        m = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril(1)
        return torch.softmax((q @ k.transpose(-2, -1)).masked_fill(~m, float("-inf")), -1) @ v"""),
    ("sliding_window", """
        m = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m.tril() & m.triu(-3))"""),
    ("mask_from_an_input", """
        return torch.softmax((q @ k.transpose(-2, -1)).masked_fill(v[..., :1] > 0, float("-inf")), -1) @ v"""),
    ("alibi_bias", """
        i = torch.arange(q.size(-2))
        s = q @ k.transpose(-2, -1) - (i[None, :] - i[:, None]).abs().float()
        return torch.softmax(s, -1) @ v"""),
    ("softmax_over_queries", "return torch.softmax(q @ k.transpose(-2, -1), -2) @ v"),
    ("dropout", "return F.dropout(torch.softmax(q @ k.transpose(-2, -1), -1), 0.1) @ v"),
    ("sdpa_dropout", "return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)"),
    ("weights_returned_too", """
        p = torch.softmax(q @ k.transpose(-2, -1), -1)
        return p @ v, p"""),
])
def test_other_attention_is_left_to_pytorch(tmp_path: Path, name: str, forward: str) -> None:
    the_plan = _plan_of(tmp_path, name, forward)
    assert "attention" not in _families(the_plan), the_plan.describe()


def test_realistic_problems_claim_the_attention_core_only() -> None:
    family = AttentionFamily()
    causal = _attention(plan(capture(PROBLEMS / "attention_causal_fp16.py")))
    assert causal.detail["causal"] and causal.detail["scale"] is None and not causal.detail["zero_empty_rows"]
    sdpa = _attention(plan(capture(PROBLEMS / "attention_sdpa_bf16.py")))
    assert not sdpa.detail["causal"] and sdpa.detail["zero_empty_rows"] and sdpa.detail["out_perm"] == (2, 0, 1, 3)
    graph = capture(PROBLEMS / "transformer_attention_fp16.py")
    block = _attention(plan(graph))
    assert block.detail["causal"] and block.detail["q_perm"] == (0, 2, 1, 3)
    ops = [graph.node(n).op for n in block.nodes]
    assert ops.count("bmm") == 2 and "addmm" not in ops  # the projections are GEMMs, another family's

    space = family.space(graph, block, "sm_90a")
    # Hopper: the first tile, then the same through TMA, then the other tiles; no TMA where the arch has none.
    assert space[0] == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    assert space[1] == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "variant": "tma"}
    assert not any(c.get("variant") == "tma" for c in family.space(graph, block, "sm_80"))
    limit = arch_spec("sm_90a").shared_memory_per_block_optin_bytes
    assert all(2 * (c["BLOCK_M"] * 64 + c["num_stages"] * c["BLOCK_N"] * 128) <= limit for c in space)
    assert len(space) >= 2 and len({tuple(c.items()) for c in space}) == len(space)
