"""The tolerance rule: honest floating-point differences pass, precision shortcuts and wrong answers fail."""

from __future__ import annotations

import math

import pytest
import torch

from kernelwright.verify import compare


def _matmul_case(dtype: torch.dtype, seed: int = 0, m: int = 64, k: int = 512, n: int = 48):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(k, n, generator=g)
    ref64 = a.double() @ b.double()
    native = (a.to(dtype) @ b.to(dtype)) if dtype != torch.bfloat16 else (a.to(dtype).float() @ b.to(dtype).float()).to(dtype)
    return a, b, native, ref64


def test_a_different_summation_order_passes() -> None:
    a, b, native, ref64 = _matmul_case(torch.float32)
    # Same maths, another order: sum the K dimension in two halves.
    got = a[:, :256] @ b[:256] + a[:, 256:] @ b[256:]
    result = compare.compare(got, native, ref64)
    assert result.ok, result.reason


def test_tf32_style_rounding_fails_an_fp32_problem() -> None:
    a, b, native, ref64 = _matmul_case(torch.float32)

    def tf32(x: torch.Tensor) -> torch.Tensor:  # keep 10 mantissa bits, as the tensor cores' TF32 mode does
        bits = x.view(torch.int32) & ~((1 << 13) - 1)
        return bits.view(torch.float32)

    got = tf32(a) @ tf32(b)
    result = compare.compare(got, native, ref64)
    assert not result.ok
    assert result.wrong_fraction > 0.5
    assert "allowed" in result.reason and "PyTorch's own error" in result.reason
    # PyTorch's own fp32 error is orders of magnitude smaller than the TF32 shortcut's.
    assert result.native_rel_l2_error is not None
    assert result.rel_l2_error > 100 * result.native_rel_l2_error


def test_fast_math_exp_error_of_a_few_ulp_passes() -> None:
    x = torch.randn(32, 300, dtype=torch.float64) * 4
    ref64 = torch.softmax(x, dim=-1)
    native = torch.softmax(x.float(), dim=-1)
    # ~10 ulp of relative noise, what ex2.approx-based exp gives in an fp32 Triton softmax.
    noise = 1 + (torch.rand(x.shape, dtype=torch.float64) - 0.5) * 2 * 10 * 2**-24
    got = (ref64 * noise).float()
    assert compare.compare(got, native, ref64).ok


def test_reports_worst_element_and_fraction() -> None:
    native = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 1
    ref64 = native.double()
    got = native.clone()
    got[2, 1] += 0.5
    result = compare.compare(got, native, ref64)
    assert not result.ok
    assert result.worst_index == (2, 1)
    assert result.wrong_count == 1
    assert result.wrong_fraction == pytest.approx(1 / 12)
    assert result.worst_got == pytest.approx(10.5)
    assert result.worst_expected == pytest.approx(10.0)
    assert "[2, 1]" in result.reason


def test_nan_must_match_the_reference_positions() -> None:
    native = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    ref64 = native.double()
    assert compare.compare(native.clone(), native, ref64).ok
    moved = torch.tensor([float("nan"), 1.0, float("inf"), 2.0])
    result = compare.compare(moved, native, ref64)
    assert not result.ok and result.nonfinite_mismatches == 2
    wrong_inf = torch.tensor([1.0, float("nan"), float("-inf"), 2.0])
    assert not compare.compare(wrong_inf, native, ref64).ok


def test_half_precision_outputs_are_judged_by_their_own_rounding() -> None:
    a, b, native, ref64 = _matmul_case(torch.float16, k=256)
    # Another valid fp16 result: fp32 accumulate of the fp16 operands, rounded once.
    got = (a.half().float() @ b.half().float()).half()
    assert compare.compare(got, native, ref64).ok
    # An fp8-like shortcut (3 mantissa bits on the operands) is far outside.
    def e4m3(x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float8_e4m3fn).to(torch.float16)

    bad = (e4m3(a.half()).float() @ e4m3(b.half()).float()).half()
    assert not compare.compare(bad, native, ref64).ok


def test_integer_outputs_must_be_exact_but_ties_may_go_either_way() -> None:
    native = torch.tensor([3, 1, 4, 1])
    ref64 = torch.tensor([3, 2, 4, 1])  # the float64 model broke a tie differently at index 1
    assert compare.compare(torch.tensor([3, 2, 4, 1]), native, ref64).ok
    assert compare.compare(torch.tensor([3, 1, 4, 1]), native, ref64).ok
    result = compare.compare(torch.tensor([3, 1, 5, 1]), native, ref64)
    assert not result.ok and result.worst_index == (2,)


def test_kernelbench_mode_reproduces_its_atol_rtol() -> None:
    native = torch.ones(10)
    ok = native + 1.5e-4  # inside 1e-4 + 1e-4 * 1
    bad = native + 3e-4
    assert compare.compare(ok, native, None, mode=compare.KERNELBENCH).ok
    assert not compare.compare(bad, native, None, mode=compare.KERNELBENCH).ok
    half = torch.ones(10, dtype=torch.float16)
    assert compare.compare(half + 0.015, half, None, mode=compare.KERNELBENCH).ok


def test_structure_problems_name_count_shape_and_dtype() -> None:
    ref = [torch.zeros(2, 3)]
    assert compare.structure_problems([torch.zeros(2, 3)], ref, "cpu") == []
    assert "2 output(s)" in compare.structure_problems([torch.zeros(2, 3)] * 2, ref, "cpu")[0]
    assert "shape (3, 2)" in compare.structure_problems([torch.zeros(3, 2)], ref, "cpu")[0]
    assert "dtype torch.float16" in compare.structure_problems([torch.zeros(2, 3, dtype=torch.float16)], ref, "cpu")[0]
    assert "not a tensor" in compare.structure_problems([3.0], ref, "cpu")[0]


def test_json_form_has_no_nan() -> None:
    native = torch.tensor([1.0, 2.0])
    result = compare.compare(torch.tensor([float("nan"), 2.0]), native, native.double())
    data = result.to_json()
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in data.values())


def _cases():
    g = torch.Generator().manual_seed(7)
    ref64 = torch.randn(300, 70, generator=g, dtype=torch.float64) * 3
    ref64[0, :5] = 0.0  # exact zeros: insignificant elements, scale-relative error
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        native = ref64.to(dtype)
        noise = 1 + 1e-3 * torch.randn(ref64.shape, generator=g, dtype=torch.float64)
        yield "honest", (ref64 * (1 + 1e-9)).to(dtype), native, ref64
        yield "noisy", (ref64 * noise).to(dtype), native, ref64
        wrong = native.clone()
        wrong[5, 3] += 10
        yield "one wrong", wrong, native, ref64
        yield "biased", (ref64 * 1.01).to(dtype), native, ref64
        yield "no ref64", (ref64 * noise).to(dtype), native, None
    zeros = torch.zeros(4, 4, dtype=torch.float64)
    yield "all zero", zeros.float(), zeros.float(), zeros
    yield "zero ref, nonzero got", torch.ones(4, 4), zeros.float(), zeros


@pytest.mark.parametrize("mode", compare.MODES)
def test_the_all_finite_path_gives_the_general_paths_figures(mode: str, monkeypatch) -> None:
    """compare() takes a fast in-place path when nothing is NaN/inf; every figure must equal the general path's."""
    for name, got, native, ref64 in _cases():
        fast = compare.compare(got, native, ref64, mode=mode)
        with monkeypatch.context() as m:
            m.setattr(compare, "_all_finite", lambda *a: False)
            general = compare.compare(got, native, ref64, mode=mode)
        for field, value in general.to_json().items():
            other = fast.to_json()[field]
            if isinstance(value, float) and isinstance(other, float):
                assert other == pytest.approx(value, rel=1e-9, abs=1e-300), (name, field, other, value)
            else:
                assert other == value, (name, field, other, value)


def test_the_fast_path_is_not_taken_with_a_nan_or_an_overflowing_reference() -> None:
    ref64 = torch.randn(8, 8, dtype=torch.float64)
    got = ref64.float().clone()
    got[1, 1] = float("nan")
    assert not compare._all_finite(got.double(), ref64.float().double(), ref64, torch.float32)
    big = ref64.clone()
    big[0, 0] = 1e6  # finite in float64, inf in float16
    assert not compare._all_finite(big, big, big, torch.float16)
    assert not compare.compare(got, ref64.float(), ref64).ok


def test_judging_on_a_device_without_room_falls_back_to_the_host_with_the_same_figures(monkeypatch) -> None:
    from kernelwright.verify import compare as cmp

    torch.manual_seed(0)
    ref64 = torch.randn(4096, dtype=torch.float64)
    native = ref64.float()
    got = native * (1 + 3e-7)
    on_host = cmp.compare(got, native, ref64)
    asked = []
    real = cmp._compare_on

    def no_room(device, *args, **kwargs):
        asked.append(device)
        if device != "cpu":
            raise torch.OutOfMemoryError("no room for the float64 buffers")
        return real(device, *args, **kwargs)

    monkeypatch.setattr(cmp, "_compare_on", no_room)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    fallen_back = cmp.compare(got, native, ref64, device="cuda")
    assert asked == ["cuda", "cpu"]
    assert fallen_back == on_host and fallen_back.ok
