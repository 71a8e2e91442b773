"""The tuning worker's sanity check judges like the verifier (float64 reference), not with KernelBench's fixed
tolerance — which threw out every candidate of a bf16 LayerNorm on the H200 for being more accurate than PyTorch."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelwright.search.worker import first_mismatch, reference_outputs
from kernelwright.verify import compare


class ResidualNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4096, dtype=torch.bfloat16)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


def _setup(offset: float = 0.0):
    torch.manual_seed(0)
    model = ResidualNorm()
    # With rows offset from zero, PyTorch's bf16 sum loses bits that the normalisation then magnifies, so a kernel
    # that adds in fp32 is visibly closer to the exact answer than PyTorch is.
    inputs = [(offset + torch.randn(128, 4096)).to(torch.bfloat16), torch.randn(128, 4096, dtype=torch.bfloat16)]
    return model, inputs


def _fused_in_fp32(model: ResidualNorm, x: torch.Tensor, residual: torch.Tensor, bias: bool = True) -> torch.Tensor:
    """What a fused kernel does: the residual sum and the statistics in fp32, one rounding at the end."""
    s = x.float() + residual.float()
    out = torch.nn.functional.layer_norm(s, (4096,), model.norm.weight.float(),
                                         model.norm.bias.float() if bias else None, model.norm.eps)
    return out.to(torch.bfloat16)


def test_a_kernel_more_accurate_than_pytorch_passes() -> None:
    model, inputs = _setup(offset=64.0)
    expected, expected64 = reference_outputs(model, inputs)
    got = [_fused_in_fp32(model, *inputs)]
    # KernelBench's tolerance rejects it (the reason the worker no longer uses it) ...
    assert not compare.compare(got[0], expected[0], None, mode=compare.KERNELBENCH).ok
    # ... the verifier's float64-relative bound accepts it.
    assert expected64[0] is not None and expected64[0].dtype == torch.float64
    assert first_mismatch(got, expected, expected64, roundoff=0.0, device_type="cpu") is None


def test_a_wrong_kernel_is_still_caught() -> None:
    model, inputs = _setup()
    expected, expected64 = reference_outputs(model, inputs)
    reason = first_mismatch([_fused_in_fp32(model, *inputs, bias=False)], expected, expected64, roundoff=0.0,
                            device_type="cpu")
    assert reason and "error" in reason


def test_structure_problems_come_first() -> None:
    model, inputs = _setup()
    expected, expected64 = reference_outputs(model, inputs)
    reason = first_mismatch([_fused_in_fp32(model, *inputs).float()], expected, expected64, roundoff=0.0,
                            device_type="cpu")
    assert reason and "dtype" in reason


def test_a_model_without_a_float64_form_falls_back_to_native() -> None:
    class Fp16Only(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.dtype == torch.float64:
                raise TypeError("no float64 here")
            return x * 2

    x = torch.randn(64, dtype=torch.bfloat16)
    expected, expected64 = reference_outputs(Fp16Only(), [x])
    assert expected64 == [None]
    assert first_mismatch([x * 2], expected, expected64, roundoff=0.0, device_type="cpu") is None
    assert first_mismatch([x * 3], expected, expected64, roundoff=0.0, device_type="cpu")


def _candidate(tmp_path):
    from kernelwright.search.records import Candidate

    path = tmp_path / "c000.py"
    path.write_text("raise SystemExit('never imported: the worker fails first')\n")
    return Candidate(index=0, label="default", choice=(0,), configs=({},), path=path, sha256="0")


def test_a_worker_that_fails_before_its_first_candidate_says_why_for_every_candidate(tmp_path) -> None:
    """A CPU-only machine asked for CUDA: the worker cannot start, and every candidate is charged with the reason
    (on the H200 such a failure once left an empty candidates.csv and "no candidate was built")."""
    import pytest

    from kernelwright.search.evaluate import GpuEvaluator

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA, where the worker's set-up fails")
    problem = tmp_path / "problem.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
                       "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n")
    outcomes = list(GpuEvaluator(problem).time([_candidate(tmp_path)]))
    assert [o.status for o in outcomes] == ["failed"]
    assert outcomes[0].error.startswith("the tuning worker") and len(outcomes[0].error) > 40


def test_a_spent_budget_starts_no_worker(tmp_path) -> None:
    from kernelwright.deadline import Deadline
    from kernelwright.search.evaluate import GpuEvaluator

    assert list(GpuEvaluator(tmp_path / "unused.py").time([_candidate(tmp_path)],
                                                           deadline=Deadline.after(-1.0))) == []
