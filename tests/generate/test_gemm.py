"""Family 4: GEMM / batched GEMM / linear with a fused epilogue, proven under the interpreter on odd shapes, with
the sm_90a instruction evidence the verifier collects by cross-compiling."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from kernelwright.generate.families.base import Policy
from kernelwright.generate.families.gemm import GemmFamily
from kernelwright.generate.families.gemm.family import smem_bytes
from kernelwright.generate.families.gemm.model import Atom, regroup
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import Plan, plan
from kernelwright.records import Status

from .conftest import write_problem

PROBLEMS = Path(__file__).resolve().parents[2] / "problems"


def _families(the_plan) -> list[str]:
    return [g.family for g in the_plan.groups]


def _ops(the_plan, index: int = 0) -> list[str]:
    group = the_plan.groups[index]
    return [the_plan.graph.node(n).op for n in group.nodes]


def _opcodes(verdict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kernel in verdict.instructions:
        if kernel.arch == "sm_90a":
            for opcode, n in kernel.histogram_by_opcode.items():
                counts[opcode] = counts.get(opcode, 0) + n
    return counts


# The space's FMA configurations of an fp32 GEMM (after the 3xTF32 ones it leads with): IEEE, B copied N-major.
FMA = {"precision": "ieee", "kmajor": False, "b_tile": "kn", "b_copy": True}


def _matmul_group(tmp_path: Path, name: str, a: str, b: str) -> tuple[Plan, object]:
    """The plan of ``a @ b`` over inputs ``a`` and ``b`` (constructor expressions), and its one group."""
    the_plan = plan(capture(write_problem(tmp_path, name, f"""
        class Model(nn.Module):
            def forward(self, a, b):
                return a @ b

        def get_inputs():
            return [{a}, {b}]

        def get_init_inputs():
            return []
    """)), [GemmFamily()])
    return the_plan, the_plan.groups[0]


@pytest.mark.instructions
@pytest.mark.slow
def test_linear_on_3d_input_fp32_ieee_at_a_second_shape(check, tmp_path: Path) -> None:
    """view + addmm + view around nn.Linear on [B, T, C], silu (sigmoid * x) fused; the FMA configuration stays
    IEEE: no TF32 MMA, and the view sizes follow the input at the second shape (batch 3 -> 1, tokens 7 -> 5)."""
    the_plan, verdict = check("linear3d_silu", """
        class Model(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.linear = nn.Linear(in_features, out_features)

            def forward(self, x):
                return F.silu(self.linear(x))

        batch = 3
        tokens = 7
        in_features = 33
        out_features = 40

        def get_inputs():
            return [torch.randn(batch, tokens, in_features)]

        def get_init_inputs():
            return [in_features, out_features]
    """, config_overrides=FMA, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert sorted(_ops(the_plan)) == sorted(["view", "permute", "addmm", "view", "sigmoid", "mul"])
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    source = (tmp_path / "linear3d_silu_candidate.py").read_text()
    # The weight is read in place through its strides; only a big GEMM copies a K-major B N-major for the FMA dot.
    assert 'input_precision="ieee"' in source and source.count(".contiguous()") == 1
    assert ".stride(-1) != 1:\n" in source
    assert not any(f.code == "tf32-in-fp32" for f in verdict.findings)
    opcodes = _opcodes(verdict)
    assert opcodes.get("FFMA", 0) > 0  # the dot runs as fp32 FMAs...
    assert not any("MMA" in op and "TF32" in op for op in opcodes), opcodes  # ...not as TF32 tensor-core MMAs


@pytest.mark.instructions
@pytest.mark.slow
@pytest.mark.parametrize(("variant", "load"), [("tma", "UTMALDG"), ("pointer", "LDGSTS")])
def test_bf16_linear_gelu_runs_hgmma_with_padded_unaligned_rows(check, variant: str, load: str) -> None:
    """K = 257 bf16 rows are 514 bytes: no 16-byte loads in place, and no TMA descriptor over them (its strides must
    be 16-byte multiples). The launcher pads them (the GEMM is big enough) and the sm_90a code shows the warpgroup
    MMAs with the variant's loads: TMA (the default on Hopper) or 16-byte async copies (the pointer variant)."""
    the_plan, verdict = check("linear_gelu_bf16", """
        class Model(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.linear = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

            def forward(self, x):
                return F.gelu(self.linear(x))

        def get_inputs():
            return [torch.randn(256, 257, dtype=torch.bfloat16)]

        def get_init_inputs():
            return [257, 256]
    """, config_overrides={"variant": variant}, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert sorted(_ops(the_plan)) == ["addmm", "gelu", "permute"]
    assert verdict.status is Status.PASSED, verdict.message
    opcodes = _opcodes(verdict)
    assert any(op.startswith("HGMMA") and "BF16" in op for op in opcodes), opcodes
    assert any(op.startswith(load) and (load != "LDGSTS" or op.endswith(".128")) for op in opcodes), opcodes


@pytest.mark.slow
@pytest.mark.parametrize(("m", "n", "k", "fma"), [(1, 127, 1000, True), (1000, 7, 1, False)])
def test_odd_sizes_transposed_weight_addmm_scale(check, m: int, n: int, k: int, fma: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """addmm with beta/alpha on ``x @ w.t()``, a bias row and a per-row scale column fused; edge tiles masked for
    M, N, K of 1, 7, 127, 1000; two configurations, B's tile loaded as K x N and as N x K (transposed for the
    dot). The FMA case copies the K-major w N-major before the dot (``b_copy``) and pads its 127-wide rows: the
    big-GEMM branch, taken here at any size. The 3xTF32 case (the fp32 default) reads w in place, K-major as
    wgmma wants it, its 1-wide K rows padded to 16 bytes."""
    from kernelwright.generate.families.gemm import writing

    monkeypatch.setattr(writing, "_PAD_MIN_MACS", 1 if fma else writing._PAD_MIN_MACS)
    the_plan, verdict = check(f"addmm_{m}x{n}x{k}", f"""
        class Model(nn.Module):
            def forward(self, bias, x, w, s):
                return torch.addmm(bias, x, w.t(), beta=0.5, alpha=2.0) * s

        def get_inputs():
            return [torch.randn({n}), torch.randn({m}, {k}), torch.randn({n}, {k}), torch.randn({m}, 1)]

        def get_init_inputs():
            return []
    """, config_overrides=FMA if fma else None, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert sorted(_ops(the_plan)) == ["addmm", "mul", "permute"]
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.instructions
@pytest.mark.slow
@pytest.mark.parametrize(("case", "config_index"), [("transposed_a_row_major_b", 0), ("linear", 1)])
def test_fp32_leads_with_k_major_3xtf32_on_hgmma(check, tmp_path: Path, case: str, config_index: int) -> None:
    """fp32 without --allow-tf32 (issue 29): the first configuration is 3xTF32 on TF32 warpgroup MMAs with both
    operands K-major. ``a.t() @ b`` (A M-major, B row-major, K = 37: rows not 16-byte multiples): the launcher
    copies each K-major (B's K rows padded), then B's tile is loaded N x K. nn.Linear's weight is K-major already
    and is read in place, here through TMA descriptors over its transpose (the second configuration on Hopper).
    The interpreter checks the values; the sm_90a cross-compile shows the MMAs; the GPU's trials judge 3xTF32's
    accuracy (scaled and heavy-tailed inputs)."""
    body = {"transposed_a_row_major_b": """
        class Model(nn.Module):
            def forward(self, a, b):
                return a.t() @ b

        def get_inputs():
            return [torch.randn(37, 48), torch.randn(37, 40)]

        def get_init_inputs():
            return []
    """, "linear": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(64, 48)

            def forward(self, x):
                return torch.relu(self.linear(x))

        def get_inputs():
            return [torch.randn(40, 64)]

        def get_init_inputs():
            return []
    """}[case]
    the_plan, verdict = check(f"tf32x3_{case}", body, config_index=config_index, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    source = (tmp_path / f"tf32x3_{case}_candidate.py").read_text()
    assert 'input_precision="tf32x3"' in source
    # K = 37 padded to 48 for the pointer form; the TMA form's descriptors zero-fill K, so it pads nothing.
    assert f"_k_major(mat_a, mat_b, pad={case != 'linear'})" in source
    opcodes = _opcodes(verdict)
    assert any(op.startswith("HGMMA") and "TF32" in op for op in opcodes), opcodes
    assert (case == "linear") == any(op.startswith("UTMALDG") for op in opcodes), opcodes
    tf32 = [f for f in verdict.findings if f.code == "tf32-in-fp32"]
    assert tf32 and all(f.severity == "note" for f in tf32)  # split precision, told apart from a TF32 shortcut


@pytest.mark.instructions
@pytest.mark.slow
@pytest.mark.parametrize(("rows", "dtype"), [(24, "float32"), (24, "bfloat16"), (1, "float32")])
def test_split_k_for_a_long_k_and_few_tiles(check, tmp_path: Path, rows: int, dtype: str) -> None:
    """A 24 x 40 output from K = 5000: one 64 x 64 tile for 132 SMs, so the space leads with split K — fp32: 9
    shares of 576 (K steps of 32, the last share masked at 392); bf16: 4 of 1280 (steps of 64) — their fp32 partial
    tiles summed in order by the epilogue kernel, which adds the bias row and applies relu. A second shape changes
    every size at run time. One row (a batch-1 linear layer): M = 1 reaches the kernels as a constant, which both
    must compile with (the sm_90a cross-compile of each is checked)."""
    the_plan, verdict = check(f"split_k_{rows}_{dtype}", f"""
        class Model(nn.Module):
            def forward(self, x, w, bias):
                return torch.relu(torch.addmm(bias, x, w))

        rows = {rows}
        depth = 5000
        cols = 40

        def get_inputs():
            return [torch.randn(rows, depth, dtype=torch.{dtype}), torch.randn(depth, cols, dtype=torch.{dtype}),
                    torch.randn(cols, dtype=torch.{dtype})]

        def get_init_inputs():
            return []
    """, distribution_trials=False, shape_trial=True)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    source = (tmp_path / f"split_k_{rows}_{dtype}_candidate.py").read_text()
    assert f"n_split = max(1, min({ {'float32': 9, 'bfloat16': 4}[dtype]}, " in source
    assert "_splitk_epilogue[" in source
    assert {k.name for k in verdict.instructions if k.arch == "sm_90a"} >= {"kw_gemm_0_kernel",
                                                                            "kw_gemm_0_splitk_epilogue"}


@pytest.mark.instructions
@pytest.mark.slow
def test_fp16_baddbmm_transposed_operand_second_config(check) -> None:
    """Export writes an fp16 baddbmm as fp32 casts, an fp32 bmm, alpha * ., beta * c, add and a cast back: all of
    it on the tile, the bmm on fp16 tensor cores (products of fp16 values are exact in fp32); b.transpose(1, 2)
    read in place; the 128x256 configuration."""
    the_plan, verdict = check("baddbmm_fp16", """
        class Model(nn.Module):
            def forward(self, c, a, b):
                return torch.relu(torch.baddbmm(c, a, b.transpose(1, 2), beta=0.5, alpha=2.0))

        def get_inputs():
            return [torch.randn(3, 17, 33, dtype=torch.float16), torch.randn(3, 17, 40, dtype=torch.float16),
                    torch.randn(3, 33, 40, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """, config_index=1, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert sorted(_ops(the_plan)) == ["_to_copy"] * 4 + ["add", "bmm", "mul", "mul", "permute", "relu"]
    assert verdict.status is Status.PASSED, verdict.message
    assert any(op.startswith("HGMMA") for op in _opcodes(verdict))


@pytest.mark.slow
def test_broadcast_batched_matmul_at_a_second_shape(check) -> None:
    """matmul([batch, heads, M, K], [heads, K, N]): export's expand/view/clone glue around bmm, the weight
    broadcast over the batch; the batch size (3, then 1) comes from the input at run time."""
    the_plan, verdict = check("broadcast_matmul", """
        class Model(nn.Module):
            def forward(self, x, w, y):
                return torch.matmul(x, w) * 0.5 + y

        batch = 3

        def get_inputs():
            return [torch.randn(batch, 2, 9, 20), torch.randn(2, 20, 11), torch.randn(11)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert "bmm" in _ops(the_plan) and "add" in _ops(the_plan)
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


def test_triangular_result_and_row_index_computed_from_tile_coordinates(check) -> None:
    """``triu(a @ b, 1)`` of a batched product plus a term in the row's index: export writes the triangle as two
    ``arange``s, their difference and a ``where``, the row index as another ``arange``. The kernel computes all of
    them from its tile coordinates (no index tensor is made, nothing is left to PyTorch); odd sizes, a second
    shape."""
    the_plan, verdict = check("triu_bmm", """
        class Model(nn.Module):
            def forward(self, a, b):
                rows = torch.arange(a.shape[1], device=a.device)[:, None]
                return torch.triu(torch.bmm(a, b), diagonal=1) + rows * 0.25

        batch, m, k, n = 2, 37, 19, 45

        def get_inputs():
            return [torch.randn(batch, m, k), torch.randn(batch, k, n)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert _ops(the_plan).count("arange") == 3
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


_TMA = {"variant": "tma", "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}


@pytest.mark.instructions
@pytest.mark.slow
@pytest.mark.parametrize("case", ["linear", "bmm"])
def test_tma_persistent_variant(check, case: str) -> None:
    """The TMA variant (tensor-descriptor loads, a persistent grid of 4 programs under the interpreter walking
    10 or 6 tiles): nn.Linear's K-major weight read in place through a transposed descriptor (``B_T``); a batched
    product whose A is a transposed view (``A_T``, rank-3 descriptors) and whose B's 33-wide rows are not 16-byte
    multiples (copied into padded rows); edge tiles zero-filled by the descriptor and masked at the store; a second
    shape. The sm_90a code shows the bulk tensor loads and warpgroup MMAs."""
    body = {"linear": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(40, 72, dtype=torch.bfloat16)

            def forward(self, x):
                return F.gelu(self.linear(x))

        rows = 300

        def get_inputs():
            return [torch.randn(rows, 40, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """, "bmm": """
        class Model(nn.Module):
            def forward(self, a, b):
                return torch.bmm(a.transpose(1, 2), b) * 0.5

        batch = 3

        def get_inputs():
            return [torch.randn(batch, 24, 40, dtype=torch.float16), torch.randn(batch, 24, 33, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """}[case]
    the_plan, verdict = check(f"tma_{case}", body, config_overrides=_TMA, distribution_trials=False)
    assert _families(the_plan) == ["gemm"] and the_plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    opcodes = _opcodes(verdict)
    assert any(op.startswith("UTMALDG") for op in opcodes), opcodes
    assert any(op.startswith("HGMMA") for op in opcodes), opcodes


# ------------------------------------------------------------------------------------- no verifier: fast checks
def test_regroup_tracks_dimensions_symbolically() -> None:
    x0, x1, x2 = Atom("x", 0, 3), Atom("x", 1, 5), Atom("x", 2, 16)
    dims = [(x0,), (x1,), (x2,)]
    assert regroup(dims, [15, 16]) == [(x0, x1), (x2,)]  # a linear's [B, T, C] -> [B*T, C]
    assert regroup([(x0, x1), (x2,)], [3, 5, 16]) == [(x0,), (x1,), (x2,)]  # and back
    assert regroup(dims, [1, 15, 16, 1]) == [(), (x0, x1), (x2,), ()]
    assert regroup([(Atom("y", 0, 15),), (x2,)], [3, 5, 16]) is None  # a cut inside one input dimension


def test_space_policy_and_shared_memory_pruning(tmp_path: Path) -> None:
    family = GemmFamily()
    half = plan(capture(PROBLEMS / "matmul.py"), [family])
    fp32 = plan(capture(PROBLEMS / "matmul_fp32.py"), [family])
    (g_half,), (g_fp32,) = half.groups, fp32.groups

    h200 = family.space(half.graph, g_half, "sm_90a")
    # 4096 x 4096 outputs: 512 tiles of 128 x 256 fill the 132 SMs, so the wide tile goes first.
    assert (h200[0]["BLOCK_M"], h200[0]["BLOCK_N"], h200[0]["BLOCK_K"]) == (128, 256, 64)
    # Hopper: every tile through TMA on a persistent grid, the first also deeper with warp specialisation, and the
    # first two again as the cp.async variant (measured slower in run 37, kept for the shapes TMA cannot take).
    assert h200[0]["variant"] == "tma" and (h200[1]["num_stages"], h200[1]["warp_specialize"]) == (4, True)
    assert (h200[2]["BLOCK_M"], h200[2]["BLOCK_N"], h200[2]["variant"]) == (128, 128, "tma")
    triton = [c for c in h200 if c.get("backend") != "cuda"]
    assert [c.get("variant", "pointer") for c in triton[-2:]] == ["pointer", "pointer"]
    # The CUDA C++ kernels (tests/generate/test_gemm_cuda.py) after every Triton configuration: untimed leads.
    assert [c.get("variant") for c in h200[len(triton):]] == ["wgmma", "wgmma", "mma_sync"]
    assert len(h200) >= 2 and all(smem_bytes(c, 2) <= 227 * 1024 for c in h200)
    ada = family.space(half.graph, g_half, "sm_89")  # 99 KiB a block: the 144 KiB configurations go
    assert all(smem_bytes(c, 2) <= 101376 for c in ada) and len(ada) < len(h200)
    assert not any(c["BLOCK_N"] == 256 for c in ada)  # nothing wide to put first there
    assert not any(c.get("variant") == "tma" for c in ada)  # and no tensor-memory accelerator
    # A skinny GEMM makes enough 128 x 256 tiles (32768 x 16: 256 of them) but would mask 15/16 of each.
    thin, g_thin = _matmul_group(tmp_path, "skinny", "torch.randn(32768, 64, dtype=torch.float16)",
                                 "torch.randn(64, 16, dtype=torch.float16)")
    assert family.space(thin.graph, g_thin, "sm_90a")[0]["BLOCK_N"] == 128

    strict = family.space(fp32.graph, g_fp32, "sm_90a")
    # fp32 without --allow-tf32: 3xTF32 first (fp32-accurate, on tensor cores), operands K-major; on Hopper its TMA
    # form leads where M, N and K are multiples of 16 (4096^3 here), the pointer form (B's tile N x K) next; then
    # the FMA tiles. Never plain TF32.
    assert [(c["precision"], c.get("variant", "pointer")) for c in strict[:3]] == [
        ("tf32x3", "tma"), ("tf32x3", "pointer"), ("tf32x3", "pointer")]
    assert all(c["kmajor"] for c in strict[:3]) and strict[1]["b_tile"] == "nk"
    assert strict[3]["precision"] == "ieee" and not any(c["precision"] == "tf32" for c in strict)
    assert max(c["BLOCK_K"] for c in strict) <= 32  # SIMT FMA tiles: smaller than the tensor-core ones
    ampere = family.space(fp32.graph, g_fp32, "sm_80")  # TF32 tensor cores, no TMA
    assert ampere[0]["precision"] == "tf32x3" and not any(c.get("variant") == "tma" for c in ampere)
    volta = family.space(fp32.graph, g_fp32, "sm_70")  # no TF32: the FMA tiles only
    assert {c["precision"] for c in volta} == {"ieee"}
    source = family.render(fp32.graph, g_fp32, strict[1], "kw_gemm_0").source
    assert 'input_precision="tf32x3"' in source and "mat_a, mat_b, K = kw_gemm_0_k_major(mat_a, mat_b, pad=True)" in source
    odd, g_odd = _matmul_group(tmp_path, "odd_fp32", "torch.randn(256, 293)", "torch.randn(293, 512)")
    first = family.space(odd.graph, g_odd, "sm_90a")[:2]  # K = 293: the pointer form, K padded, before TMA
    assert [c.get("variant", "pointer") for c in first] == ["pointer", "tma"]
    tf32 = family.space(fp32.graph, g_fp32, "sm_90a", Policy(allow_tf32=True))
    assert tf32[0]["precision"] == "tf32" and any(c["precision"] == "ieee" for c in tf32)
    source = family.render(fp32.graph, g_fp32, tf32[0], "kw_gemm_0").source
    assert 'input_precision="tf32"' in source


def test_claims_on_project_problems() -> None:
    mlp = plan(capture(PROBLEMS / "mlp_block_bf16.py"))
    assert _families(mlp) == ["gemm", "gemm"] and mlp.fully_covered
    assert sorted(_ops(mlp, 0)) == ["addmm", "gelu", "permute"]  # fc1 with its tanh-GELU epilogue
    residual = plan(capture(PROBLEMS / "gemm_residual_scale_bf16.py"))
    assert _families(residual) == ["gemm"] and sorted(_ops(residual)) == ["add", "mm", "mul"]


def test_integer_matmul_stays_in_pytorch(tmp_path: Path) -> None:
    problem = tmp_path / "int_mm.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, a, b):\n"
        "        return a @ b\n\n\n"
        "def get_inputs():\n"
        "    return [torch.randint(-3, 3, (8, 8)), torch.randint(-3, 3, (8, 8))]\n\n\n"
        "def get_init_inputs():\n"
        "    return []\n")
    graph = capture(problem)
    assert GemmFamily().claim(graph, graph.node("mm"), set()) is None
    assert torch.int64 == graph.info("mm").dtype


def test_index_values_from_a_run_time_start_stay_in_pytorch(tmp_path: Path) -> None:
    # `arange(m, 2 * m)` and `arange(2 * m)[-m:]` start at a size: the tile coordinates plus the example's m would be
    # wrong at any other m, so those index values are read from PyTorch's tensors (a review found it, 2026-12-02).
    path = write_problem(tmp_path, "sized_start", """
        class Model(nn.Module):
            def forward(self, a, b):
                y = a @ b
                m = y.shape[0]
                return y + torch.arange(m, 2 * m)[:, None] + torch.arange(2 * m)[-m:][:, None]

        m, k, n = 16, 8, 12

        def get_inputs():
            return [torch.randn(m, k), torch.randn(k, n)]

        def get_init_inputs():
            return []
    """)
    the_plan = plan(capture(path))
    (group,) = [g for g in the_plan.groups if g.family == "gemm"]
    assert not group.detail["gemm"].indices
    assert "arange" not in _ops(the_plan)


def test_k_major_operands_padded_to_sixteen_element_k(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 3xTF32 launcher's operands (issue 29: 8_Matmul_with_irregular_shapes_'s K = 2949 ran at 18.6 TFLOP/s
    against 69 at 4096^3, run 58): a K that is not a multiple of 16 is zero-padded to one, each operand K-major in
    a fresh tensor (the inputs untouched), so the kernel's K mask and row strides are in 16-element runs; a K that
    is one already is read in place where its layout allows."""
    family = GemmFamily()
    fp32 = plan(capture(PROBLEMS / "matmul_fp32.py"), [family])
    (group,) = fp32.groups
    config = family.space(fp32.graph, group, "sm_90a")[0]
    header = "import torch\nimport triton\nimport triton.language as tl\n"
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the copy is a Triton kernel: the interpreter runs it here
    (tmp_path / "kmajor_candidate.py").write_text(header + family.render(fp32.graph, group, config, "kw").source)
    spec = importlib.util.spec_from_file_location("kmajor_candidate", tmp_path / "kmajor_candidate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    k_major = module.kw_k_major
    a, b = torch.randn(9, 37), torch.randn(37, 5)
    a0, b0 = a.clone(), b.clone()
    pa, pb, k = k_major(a, b, pad=True)
    assert k == 48 and pa.shape == (9, 48) and pb.shape == (48, 5)
    assert pa.stride() == (48, 1) and pb.stride() == (1, 48)  # both K-major, rows of 16-element multiples
    assert torch.equal(pa[:, :37], a) and torch.equal(pb[:37], b) and not pa[:, 37:].any() and not pb[37:].any()
    assert torch.allclose(pa @ pb, a @ b, atol=1e-5) and torch.equal(a, a0) and torch.equal(b, b0)
    assert pa.data_ptr() != a.data_ptr() and pb.data_ptr() != b.data_ptr()
    a, w = torch.randn(9, 32), torch.randn(5, 32)  # K = 32, B K-major already (a linear weight read as w.t())
    pa, pb, k = k_major(a, w.t(), pad=True)
    assert k == 32 and pa.data_ptr() == a.data_ptr() and pb.data_ptr() == w.data_ptr()
    a_m, b_n = a.t().contiguous().t(), torch.randn(32, 5)  # M-major A, row-major B: each copied once
    pa, pb, k = k_major(a_m, b_n, pad=True)
    assert k == 32 and pa.stride() == (32, 1) and pb.stride() == (1, 32)
    assert torch.equal(pa, a_m) and torch.equal(pb, b_n)
    a3, b3 = torch.randn(2, 70, 20), torch.randn(2, 20, 67)  # batched, over one copy tile: K padded to 32
    pa, pb, k = k_major(a3, b3, pad=True)
    assert k == 32 and pa.shape == (2, 70, 32) and pb.shape == (2, 32, 67) and pb.stride() == (67 * 32, 1, 32)
    assert torch.equal(pa[..., :20], a3) and torch.equal(pb[:, :20], b3) and not pb[:, 20:].any()
    # The TMA form (descriptors zero-fill K): no padding of K, only copies where the layout needs one, with
    # 16-element rows so that the descriptors can take them.
    pa, pb, k = k_major(a3, b3, pad=False)
    assert k == 20 and pa.data_ptr() != a3.data_ptr() and pa.stride() == (70 * 32, 32, 1)
    assert pb.shape == (2, 20, 67) and pb.stride() == (67 * 32, 1, 32) and torch.equal(pb, b3)


def test_split_k_order_for_large_k(tmp_path: Path) -> None:
    """6_Matmul_with_large_K's shape (256 x 256 from K = 524288, fp32): the 128 x 128 tile in 32 shares first (about
    one program an SM: 1.236 ms on the H200 against 1.539 for the 64 x 64 tile in 16, 2026-12-04), then 64 x 64."""
    the_plan, group = _matmul_group(tmp_path, "large_k", 'torch.randn(256, 524288, device="meta")',
                                    'torch.randn(524288, 256, device="meta")')
    space = GemmFamily().space(the_plan.graph, group, "sm_90a")
    assert [(c["BLOCK_M"], c["BLOCK_N"], c.get("split_k")) for c in space[:2]] == [(128, 128, 32), (64, 64, 16)]
    assert all(c["precision"] == "tf32x3" and c.get("variant", "pointer") == "pointer" for c in space[:2])
