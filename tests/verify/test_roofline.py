"""Work counting and the two floors, against hand-worked numbers."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kernelwright.verify.roofline import WorkCount, count_work, floors, traits


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 32)

    def forward(self, x, unused):
        return torch.relu(self.linear(x))


def test_matmul_flops_by_dtype_and_minimum_bytes() -> None:
    torch.manual_seed(0)
    model = _Linear()
    x, unused = torch.randn(128, 64), torch.randn(1000)
    out = model(x, unused)
    work = count_work(model, [x, unused], [out], ignored_inputs=[1])
    assert work.matmul_flops == {"float32": pytest.approx(2 * 128 * 64 * 32)}
    assert "matmul" in work.kinds
    # x (128x64) + out (128x32) + W (32x64) + b (32), fp32; the ignored input is not counted.
    assert work.bytes == 4 * (128 * 64 + 128 * 32 + 32 * 64 + 32)
    assert work.ignored_inputs == (1,)
    assert WorkCount.from_json(work.to_json()) == work


def test_attention_and_softmax_are_recognised() -> None:
    q = k = v = torch.randn(2, 4, 64, 32)

    class Attention(nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    model = Attention()
    work = count_work(model, [q, k, v], [model(q, k, v)])
    assert work.total_matmul_flops == pytest.approx(2 * 2 * 4 * 64 * 64 * (32 + 32), rel=0.01)
    assert traits(work).compute_dtype == "float32"


def test_traits_memory_bound_unless_intensity_is_high() -> None:
    softmax = WorkCount(matmul_flops={}, elementwise_flops=5e7, input_bytes=1.3e8, ignored_inputs=(),
                        output_bytes=1.3e8, parameter_bytes=0, kinds=("softmax",), dtypes=("float32",))
    assert traits(softmax).dominant == "memory"
    gemm = WorkCount(matmul_flops={"bfloat16": 2 * 4096**3}, elementwise_flops=0, input_bytes=2 * 2 * 4096**2,
                     ignored_inputs=(), output_bytes=2 * 4096**2, parameter_bytes=0, kinds=("matmul",),
                     dtypes=("bfloat16",))
    t = traits(gemm)
    assert t.dominant == "matmul" and t.compute_dtype == "bfloat16" and t.intensity > 1000
    gemv = WorkCount(matmul_flops={"float32": 2 * 4096**2}, elementwise_flops=0, input_bytes=4 * 4096**2,
                     ignored_inputs=(), output_bytes=4 * 4096, parameter_bytes=0, kinds=("matmul",),
                     dtypes=("float32",))
    assert traits(gemv).dominant == "memory"


def test_floors_from_measured_ceilings_and_datasheet_peaks() -> None:
    work = WorkCount(matmul_flops={"float16": 2 * 4096**3}, elementwise_flops=0, input_bytes=2 * 2 * 4096**2,
                     ignored_inputs=(), output_bytes=2 * 4096**2, parameter_bytes=0, kinds=("matmul",),
                     dtypes=("float16",))
    roof = floors(work, peak_bandwidth_gbs=4800, peak_tflops={"fp16": 989.4, "tf32": 494.7},
                  copy_gbs=4250, measured_tflops={"fp16": 728.5})
    assert roof.achievable_floor_ms == pytest.approx(2 * 4096**3 / 728.5e12 * 1e3)
    assert roof.physical_floor_ms == pytest.approx(2 * 4096**3 / 989.4e12 * 1e3)
    assert roof.bound == "compute"
    assert roof.percent_of_floor(roof.achievable_floor_ms * 2) == pytest.approx(50.0)


def test_fp32_matmul_physical_floor_allows_error_compensated_tensor_cores() -> None:
    work = WorkCount(matmul_flops={"float32": 1e12}, elementwise_flops=0, input_bytes=1e6, ignored_inputs=(),
                     output_bytes=1e6, parameter_bytes=0, kinds=("matmul",), dtypes=("float32",))
    roof = floors(work, peak_bandwidth_gbs=4800, peak_tflops={"fp32": 67.0, "tf32": 494.7}, copy_gbs=None,
                  measured_tflops=None)
    # Priced at a third of the TF32 peak (3xTF32 is fp32-accurate), not the 67 TFLOP/s SIMT peak.
    assert roof.physical_floor_ms == pytest.approx(1e12 / (494.7e12 / 3) * 1e3)
    assert roof.achievable_floor_ms is None
