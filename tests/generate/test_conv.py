"""Family 6: 1-D, 2-D and 3-D convolution, grouped and depthwise too, with its epilogue (bias, eval batch norm,
activations, residual), both variants — library convolution + our epilogue kernel (config 0 when there is an
epilogue) and the implicit-GEMM Triton convolution — proven under the interpreter on small, odd NCL, NCHW and NCDHW
shapes in fp32 and bf16."""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.generate.families.base import Policy
from kernelwright.generate.families.conv import ConvFamily
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import plan as make_plan
from kernelwright.records import Status

CONV_BIAS_RELU = """
    class Model(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, stride={stride}, bias=True)

        def forward(self, x):
            return torch.relu(self.conv(x))

    batch = 2
    height = 13
    width = 11

    def get_inputs():
        return [torch.randn(batch, 3, height, width)]

    def get_init_inputs():
        return [3, 16]
"""

CONV_BN_RELU_BF16 = """
    class Model(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, kernel_size=3, padding=1, stride=2, bias=False, dtype=torch.bfloat16)
            self.bn_weight = nn.Parameter(1.0 + 0.3 * torch.randn(c, dtype=torch.bfloat16))
            self.bn_bias = nn.Parameter(0.3 * torch.randn(c, dtype=torch.bfloat16))
            self.register_buffer("running_mean", 0.2 * torch.randn(c, dtype=torch.bfloat16))
            self.register_buffer("running_var", 0.5 + torch.rand(c, dtype=torch.bfloat16))

        def forward(self, x):
            y = F.batch_norm(self.conv(x), self.running_mean, self.running_var, self.bn_weight, self.bn_bias,
                             training=False, eps=1e-5)
            return torch.relu(y)

    def get_inputs():
        return [torch.randn(2, 16, 15, 15, dtype=torch.bfloat16)]

    def get_init_inputs():
        return [16]
"""


def _conv_groups(plan):
    return [g for g in plan.groups if g.family == "conv"]


def test_space_library_first_then_implicit_gemm(tmp_path) -> None:
    problem = tmp_path / "conv_space.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(CONV_BIAS_RELU.format(stride=1)))
    graph = capture(problem)
    (group,) = _conv_groups(make_plan(graph))
    space = ConvFamily().space(graph, group, "sm_90a")
    assert space[0]["variant"] == "library"
    gemm = [c for c in space[1:] if c["variant"] == "implicit_gemm"]
    assert [c["variant"] for c in space[-2:]] == ["library_nhwc"] * 2  # fp32: the channels-last library, last
    assert len(gemm) == len(space) - 3 >= 2
    # An fp32 problem gets fp32-accurate math: 3xTF32 on the tensor cores first (the filter K-major), then the FMA
    # tiles; never plain TF32 unless the policy allows it — nor 3xTF32 where the arch has no TF32 MMA.
    assert [c["precision"] for c in gemm] == ["tf32x3"] * 3 + ["ieee"] * (len(gemm) - 3)
    assert all(bool(c.get("w_kmajor")) == (c["precision"] == "tf32x3") for c in gemm)
    assert gemm[0]["layout"] == "nchw"  # 3 input channels: too few for a channels-last K block
    volta = [c for c in ConvFamily().space(graph, group, "sm_70") if c["variant"] == "implicit_gemm"]
    assert volta and {c["precision"] for c in volta} == {"ieee"}
    tf32 = [c for c in ConvFamily().space(graph, group, "sm_90a", Policy(allow_tf32=True))
            if c["variant"] == "implicit_gemm"]
    assert {c["precision"] for c in tf32} == {"tf32"}


@pytest.mark.slow
@pytest.mark.parametrize(("stride", "config_index", "second_shape"), [(1, 0, True), (2, 99, True)])
def test_conv_bias_relu_fp32(check, stride: int, config_index: int, second_shape: bool) -> None:
    # The library variant at two shapes: 3 input channels and 16 output channels; 13 x 11 with padding 1. (The
    # implicit GEMM's fp32 path, strided, with a mostly masked K block: the bare, grouped and 3-D tests.)
    plan, verdict = check(f"conv_bias_relu_s{stride}_c{config_index}", CONV_BIAS_RELU.format(stride=stride),
                          config_index=config_index, distribution_trials=second_shape,
                          shape_trial=second_shape)
    assert [g.family for g in plan.groups] == ["conv"] and plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    if second_shape:
        assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    library = any(k.name == "aten::convolution" for k in verdict.kernels)
    assert library == (config_index in (0, 99))  # config 1 is the Triton convolution: no library conv at all


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 2])
def test_conv_eval_batchnorm_relu_bf16(check, tmp_path, config_index: int) -> None:
    # Config 0, half precision's default: the library on channels-last tensors, the input copied channels-last by
    # our own kernel (15 x 15 pixels: a masked pixel tile). Config 2 is the implicit GEMM reading the input
    # channels-last (16 input channels). (The NCHW library variant's batch norm: the residual test below.)
    plan, verdict = check(f"conv_bn_relu_bf16_{config_index}", CONV_BN_RELU_BF16, config_index=config_index,
                          distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered and group.detail["bn"] is not None
    assert verdict.status is Status.PASSED, verdict.message
    source = (tmp_path / f"conv_bn_relu_bf16_{config_index}_candidate.py").read_text()
    assert ("_channels_last_kernel[" in source) == (config_index == 0)
    assert any(k.name == "aten::convolution" for k in verdict.kernels) == (config_index == 0)


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 3, 99])
def test_batchnorm_module_residual_silu_dilated(check, config_index: int) -> None:
    # 99: the last configuration, the library on channels-last tensors and the epilogue restoring NCHW.
    # Eval nn.BatchNorm2d, a residual and silu (exported as x * sigmoid(x): the epilogue is a DAG, not a chain);
    # the pre-activation sum is also returned, so the kernel stores two results. Stride 2, dilation 2, padding 2.
    plan, verdict = check(f"conv_bn_residual_silu_{config_index}", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=2, dilation=2, bias=True)
                self.bn = nn.BatchNorm2d(16)
                with torch.no_grad():
                    self.bn.running_mean.uniform_(-0.5, 0.5)
                    self.bn.running_var.uniform_(0.5, 2.0)
                    self.bn.weight.uniform_(0.5, 1.5)
                    self.bn.bias.uniform_(-0.5, 0.5)
                self.eval()

            def forward(self, x, residual):
                y = self.bn(self.conv(x)) + residual
                return y, F.silu(y)

        def get_inputs():
            return [torch.randn(2, 8, 17, 17), torch.randn(2, 16, 9, 9)]

        def get_init_inputs():
            return []
    """, config_index=config_index, distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered and len(group.outputs) == 2
    assert verdict.status is Status.PASSED, verdict.message


@pytest.mark.slow
def test_bare_conv_odd_channels_rectangular_kernel(check) -> None:
    # No epilogue: the library variant would be a copy, so the space starts with the implicit GEMM. 7 -> 5
    # channels (masked channel tiles), a 3 x 5 kernel, stride (2, 1), padding (1, 2).
    plan, verdict = check("conv_bare_odd", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(7, 5, kernel_size=(3, 5), stride=(2, 1), padding=(1, 2), bias=False)

            def forward(self, x):
                return self.conv(x)

        def get_inputs():
            return [torch.randn(1, 7, 10, 9)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    assert [g.family for g in plan.groups] == ["conv"]
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(k.name == "aten::convolution" for k in verdict.kernels)


def test_claims_ranks_groups_and_transposed(tmp_path) -> None:
    problem = tmp_path / "conv_kinds.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv1d(4, 4, 3, groups=2)
                self.c3 = nn.Conv3d(4, 4, 1, groups=4)
                self.t2 = nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1, groups=2)

            def forward(self, x1, x3, x2):
                return self.c1(x1), self.c3(x3), self.t2(x2)

        def get_inputs():
            return [torch.randn(1, 4, 9), torch.randn(1, 4, 2, 3, 3), torch.randn(1, 4, 5, 5)]

        def get_init_inputs():
            return []
    """))
    graph = capture(problem)
    the_plan = make_plan(graph)
    claimed = {g.detail["conv"]: g.detail for g in _conv_groups(the_plan)}
    convs = [n for n in graph.nodes if n.op == "convolution"]
    assert [len(n.info.shape) for n in convs] == [3, 5, 4]  # conv1d stays a convolution over NCL
    assert sorted((len(d["stride"]), d["groups"], d["transposed"]) for d in claimed.values()) == [
        (1, 2, False), (2, 2, True), (3, 4, False)]
    assert claimed[convs[2].name]["output_padding"] == (1, 1)


TRANSPOSED_2D = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(5, 6, kernel_size=3, stride=2, padding=1, output_padding=1)

        def forward(self, x):
            return torch.relu(self.up(x))

    height = 5
    width = 7

    def get_inputs():
        return [torch.randn(2, 5, height, width)]

    def get_init_inputs():
        return []
"""


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 1])
def test_transposed_2d_strided_output_padding_fp32(check, config_index: int) -> None:
    # Config 0: the library's transposed convolution and our epilogue; config 1: the phase-split implicit GEMM
    # (4 phases of a stride-2 output, 5 -> 10 rows), with a second shape for the GEMM.
    plan, verdict = check(f"conv_t2d_{config_index}", TRANSPOSED_2D, config_index=config_index,
                          distribution_trials=False, shape_trial=config_index == 1)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered and group.detail["transposed"]
    assert verdict.status is Status.PASSED, verdict.message
    library = any(k.name == "aten::convolution" for k in verdict.kernels)
    assert library == (config_index == 0)
    if config_index == 1:
        assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


@pytest.mark.slow
def test_transposed_3d_grouped_dilated_bf16(check) -> None:
    # Groups of 8 -> 3 channels, stride (2, 1, 3) with dilation (1, 2, 2): along the last dimension some phases
    # have no taps at all (their pixels are the bias alone), along the first every other tap; no epilogue but the
    # bias, so the implicit GEMM is the default.
    plan, verdict = check("conv_t3d_grouped_bf16", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.ConvTranspose3d(16, 6, kernel_size=(3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 2),
                                             dilation=(1, 2, 2), output_padding=(1, 0, 1), groups=2,
                                             dtype=torch.bfloat16)

            def forward(self, x):
                return self.up(x)

        def get_inputs():
            return [torch.randn(1, 16, 3, 4, 3, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert group.detail["transposed"] and group.detail["groups"] == 2
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(k.name == "aten::convolution" for k in verdict.kernels)


GROUPED = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(6, 9, kernel_size=3, padding=1, groups=3, bias=True)

        def forward(self, x):
            return torch.relu(self.conv(x))

    batch = 2
    width = 9

    def get_inputs():
        return [torch.randn(batch, 6, 7, width)]

    def get_init_inputs():
        return []
"""


@pytest.mark.slow
def test_grouped_conv_bias_relu_fp32(check) -> None:
    # 3 groups of 2 input and 3 output channels (masked tiles in both), 7 x 9 and a second shape: the grouped
    # implicit GEMM (config 1). The library variant's groups are proven by the 3-D test.
    plan, verdict = check("conv_grouped", GROUPED, config_index=1, distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered and group.detail["groups"] == 3
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    assert not any(k.name == "aten::convolution" for k in verdict.kernels)


@pytest.mark.slow
def test_depthwise_strided_padded_bf16(check) -> None:
    # Depthwise with a channel multiplier of 2 (groups = in_channels = 5), stride 2, padding 1, no bias: the direct
    # kernel (the default; the grouped implicit GEMM, its config 3 here, is proven by test_grouped_conv_bias_relu).
    plan, verdict = check("conv_depthwise_bf16", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(5, 10, kernel_size=3, stride=2, padding=1, groups=5, bias=False,
                                      dtype=torch.bfloat16)

            def forward(self, x):
                return self.conv(x)

        def get_inputs():
            return [torch.randn(2, 5, 11, 8, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert group.detail["groups"] == 5
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(k.name == "aten::convolution" for k in verdict.kernels)


def test_depthwise_direct_space_and_epilogues(tmp_path) -> None:
    from tests.generate.conftest import generate, write_problem

    problem = write_problem(tmp_path, "dw_space", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
                self.full = nn.Conv2d(4, 4, 3, padding=1, groups=2)

            def forward(self, x):
                return self.full(self.dw(x))

        def get_inputs():
            return [torch.randn(1, 4, 6, 6)]
    """)
    the_plan, candidate = generate(problem, tmp_path / "dw_space_candidate.py")
    graph = capture(problem)
    dw, grouped = (ConvFamily().space(graph, g, "sm_90a") for g in _conv_groups(the_plan))
    assert dw[0]["variant"] == "direct" and {c["variant"] for c in dw} == {"direct", "implicit_gemm"}
    assert "direct" not in {c["variant"] for c in grouped}  # two input channels a group: not depthwise
    assert "a direct depthwise convolution" in candidate.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("rank", [1, 3])
def test_depthwise_direct_ranks_with_epilogue_fp32(check, rank: int) -> None:
    # 1-D: dilated, strided, bias and tanh, a second shape; 3-D: padded, an eval batch norm and a relu.
    if rank == 1:
        body = """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv1d(6, 12, kernel_size=5, stride=2, dilation=2, padding=3, groups=6)

                def forward(self, x):
                    return torch.tanh(self.conv(x))

            length = 37

            def get_inputs():
                return [torch.randn(3, 6, length)]

            def get_init_inputs():
                return []
        """
    else:
        body = """
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv3d(3, 3, kernel_size=3, padding=1, groups=3, bias=False)
                    self.bn = nn.BatchNorm3d(3).eval()

                def forward(self, x):
                    return torch.relu(self.bn(self.conv(x)))

            def get_inputs():
                return [torch.randn(2, 3, 5, 6, 7)]

            def get_init_inputs():
                return []
        """
    plan, verdict = check(f"conv_depthwise_{rank}d", body, distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(k.name == "aten::convolution" for k in verdict.kernels)


CONV1D = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(5, 7, kernel_size=3, dilation=2, padding=1, bias=True)

        def forward(self, x):
            return torch.tanh(self.conv(x))

    length = 31

    def get_inputs():
        return [torch.randn(2, 5, length)]

    def get_init_inputs():
        return []
"""


def test_conv1d_dilated_channels_last_fp32(check) -> None:
    # Config 3: the implicit GEMM reading the NCL input channels-last, and a second length (31 -> 27).
    plan, verdict = check("conv1d_dilated", CONV1D, config_index=3, distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered and group.detail["dilation"] == (2,)
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)


CONV3D = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(4, 6, kernel_size=(3, 1, 2), padding=(1, 0, 1), stride=(1, 2, 1), groups=2,
                                  bias=True)

        def forward(self, x, y):
            return torch.relu(self.conv(x)) + y

    def get_inputs():
        return [torch.randn(1, 4, 3, 5, 6), torch.randn(1, 6, 1, 3, 7)]

    def get_init_inputs():
        return []
"""


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 1, 99])
def test_conv3d_padded_bias_relu_fp32(check, config_index: int) -> None:
    # Two groups, bias + relu, then a residual broadcast along depth (read by per-dimension strides); 6 taps, the
    # output 3 x 3 x 7. Config 0: the library convolution (groups passed on) and our epilogue; config 1: the
    # grouped implicit GEMM.
    plan, verdict = check(f"conv3d_bias_relu_{config_index}", CONV3D, config_index=config_index,
                          distribution_trials=False, shape_trial=False)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered and len(group.detail["stride"]) == 3 and group.detail["groups"] == 2
    assert verdict.status is Status.PASSED, verdict.message
    assert any(k.name == "aten::convolution" for k in verdict.kernels) == (config_index in (0, 99))
    if config_index == 99:  # the last: the library on channels-last tensors, our epilogue restoring NCDHW
        candidate = plan.graph.problem.path.with_name(f"conv3d_bias_relu_{config_index}_candidate.py")
        assert "channels_last_3d" in candidate.read_text()


@pytest.mark.slow
def test_depthwise_direct_small_images_with_operands_fp16(check) -> None:
    # 5 x 5 images (a tile holds several channels), a residual of the output's shape (flat) and a per-channel
    # scale of shape (C, 1, 1) (strided, broadcast over the pixels) read by the epilogue.
    plan, verdict = check("conv_depthwise_operands", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(24, 24, kernel_size=3, padding=1, groups=24, bias=False, dtype=torch.float16)
                self.scale = nn.Parameter(torch.rand(24, 1, 1, dtype=torch.float16) + 0.5)

            def forward(self, x):
                return torch.relu(self.conv(x) * self.scale + x)

        def get_inputs():
            return [torch.randn(3, 24, 5, 5, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """, distribution_trials=False)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered and group.detail["pointwise"]
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(k.name == "aten::convolution" for k in verdict.kernels)


_TMA_CONVS = {
    # 2-D, 12 -> 20 channels (neither a multiple of 16 bytes' worth... 12 is padded to 16), dilation 2, padding 3,
    # eval batch norm, a residual added and the pre-activation sum also returned; a second shape.
    2: """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(12, 20, kernel_size=3, padding=3, dilation=2, bias=False,
                                      dtype=torch.bfloat16)
                self.bn = nn.BatchNorm2d(20, dtype=torch.bfloat16)
                with torch.no_grad():
                    self.bn.running_mean.uniform_(-0.5, 0.5)
                    self.bn.running_var.uniform_(0.5, 2.0)
                self.eval()

            def forward(self, x, residual):
                y = self.bn(self.conv(x)) + residual
                return y, torch.relu(y)

        batch = 2
        height = 9
        width = 13

        def get_inputs():
            return [torch.randn(batch, 12, height, width, dtype=torch.bfloat16),
                    torch.randn(batch, 20, height + 2, width + 2, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """,
    # 1-D with a bias and GELU, fp16, 5 taps unpadded.
    1: """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv1d(16, 24, kernel_size=5, dtype=torch.float16)

            def forward(self, x):
                return F.gelu(self.conv(x))

        def get_inputs():
            return [torch.randn(3, 16, 37, dtype=torch.float16)]

        def get_init_inputs():
            return []
    """,
    # 3-D, 8 -> 16 channels, a 2 x 3 x 3 filter padded (0, 1, 1), bias and ReLU.
    3: """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv3d(8, 16, kernel_size=(2, 3, 3), padding=(0, 1, 1), dtype=torch.bfloat16)

            def forward(self, x):
                return torch.relu(self.conv(x))

        def get_inputs():
            return [torch.randn(2, 8, 4, 6, 7, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """,
}


def _first_tma(body: str) -> int:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        problem = Path(folder) / "p.py"
        problem.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
                           + textwrap.dedent(body))
        graph = capture(problem)
        (group,) = _conv_groups(make_plan(graph))
        return [c["variant"] for c in ConvFamily().space(graph, group, "sm_90a")].index("tma")


@pytest.mark.instructions
@pytest.mark.slow
@pytest.mark.parametrize("rank", [2, 1, 3])
def test_tma_implicit_gemm_stride_one_half(check, rank: int) -> None:
    """Stride-1 half-precision convolutions on Hopper lead with the TMA variant: a tap's input box fetched by the
    tensor-memory accelerator, padding zero-filled by it (including boxes that start before the image), channels
    padded to 16 bytes; the sm_90a code shows the descriptor loads (rank + 2 dimensions) and warpgroup MMAs."""
    plan, verdict = check(f"conv_tma_{rank}d", _TMA_CONVS[rank], config_index=_first_tma(_TMA_CONVS[rank]),
                          distribution_trials=False, shape_trial=rank == 2)
    (group,) = _conv_groups(plan)
    assert plan.fully_covered
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(k.name == "aten::convolution" for k in verdict.kernels)
    opcodes = {op for k in verdict.instructions if k.arch == "sm_90a" for op in k.histogram_by_opcode}
    assert f"UTMALDG.{rank + 2}D" in opcodes and "UTMALDG.2D" in opcodes, sorted(opcodes)
    assert any(op.startswith("HGMMA") for op in opcodes), sorted(opcodes)


def test_tma_variant_only_where_it_applies(tmp_path) -> None:
    def space(body: str, arch: str = "sm_90a"):
        problem = tmp_path / "p.py"
        problem.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
                           + textwrap.dedent(body))
        graph = capture(problem)
        (group,) = _conv_groups(make_plan(graph))
        return [c["variant"] for c in ConvFamily().space(graph, group, arch)]

    stride_one = _TMA_CONVS[2]  # with an epilogue: the library variants (measured fastest in runs 39, 47) first
    assert space(stride_one)[:4] == ["library_nhwc", "library", "tma", "tma"]
    assert space(_TMA_CONVS[1])[:2] == ["library", "tma"]  # 1-D: no channels-last library
    assert "tma" not in space(stride_one, "sm_80") and "tma" not in space(stride_one, "sm_89")  # no TMA unit
    assert "tma" not in space(CONV_BN_RELU_BF16)  # stride 2: a tap's pixels are not one box
    assert "tma" not in space(CONV_BIAS_RELU.format(stride=1))  # fp32: the FMA dot (see the GEMM family)


BARE_CONV_WIDE = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(16, 24, kernel_size=3, padding=1, groups={groups}, bias=False)

        def forward(self, x):
            return self.conv(x)

    def get_inputs():
        return [torch.randn(2, 16, 9, 7)]

    def get_init_inputs():
        return []
"""


@pytest.mark.instructions
@pytest.mark.slow
@pytest.mark.parametrize("groups", [1, 2])
def test_fp32_conv_leads_with_3xtf32_on_hgmma(check, tmp_path, groups: int) -> None:
    """fp32 without --allow-tf32 (issue 29 item 2): the implicit GEMM's first configuration is 3xTF32 on TF32
    warpgroup MMAs, the filter laid out [taps, C_out, C_in] so that B is K-major, the input channels-last where a
    group has 16 channels (ungrouped here; 8 a group when grouped: NCHW first). The interpreter checks the values
    (it computes the dot in exact fp32); the sm_90a cross-compile shows the MMAs and the split-precision note."""
    plan, verdict = check(f"conv_tf32x3_g{groups}", BARE_CONV_WIDE.format(groups=groups), distribution_trials=False)
    assert verdict.status is Status.PASSED, verdict.message
    source = (tmp_path / f"conv_tf32x3_g{groups}_candidate.py").read_text()
    assert 'input_precision="tf32x3"' in source and "c_out, c_in]: B K-major" in source
    assert ("channels_last" in source) == (groups == 1)
    opcodes = {op for k in verdict.instructions if k.arch == "sm_90a" for op in k.histogram_by_opcode}
    assert any(op.startswith("HGMMA") and "TF32" in op for op in opcodes), opcodes
    notes = [f for f in verdict.findings if f.code == "tf32-in-fp32"]
    assert notes and all(f.severity == "note" for f in notes)  # split precision, not a TF32 shortcut


@pytest.mark.instructions
@pytest.mark.slow
def test_fp32_transposed_conv_on_3xtf32_grouped(check, tmp_path) -> None:
    """A grouped, dilated, strided transposed convolution in fp32: its filter ([C_in, C_out / groups, *taps]) laid
    out [taps, C_out, C_in / groups] for the 3xTF32 implicit GEMM (config 1, after the library variant), each
    phase's taps gathered as before; a second shape."""
    plan, verdict = check("conv_t_tf32x3", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.ConvTranspose2d(8, 6, kernel_size=3, stride=2, padding=1, dilation=2, groups=2)

            def forward(self, x):
                return torch.relu(self.up(x))

        height = 5
        width = 6

        def get_inputs():
            return [torch.randn(2, 8, height, width)]

        def get_init_inputs():
            return []
    """, config_index=1, distribution_trials=False, shape_trial=True)
    (group,) = _conv_groups(plan)
    assert group.detail["transposed"] and group.detail["groups"] == 2
    assert verdict.status is Status.PASSED, verdict.message
    assert any(t.kind == "shape" and t.status == "ok" for t in verdict.trials)
    source = (tmp_path / "conv_t_tf32x3_candidate.py").read_text()
    assert 'input_precision="tf32x3"' in source and "out_channels, in_group)  # [kh, kw, c_out, c_in]" in source
    opcodes = {op for k in verdict.instructions if k.arch == "sm_90a" for op in k.histogram_by_opcode}
    assert any(op.startswith("HGMMA") and "TF32" in op for op in opcodes), opcodes
