"""Module state (verify/state.py): a running mean of zero-mean activations is judged on its layer's scale."""

from __future__ import annotations

import torch

from kernelwright.verify.compare import compare
from kernelwright.verify.state import state_problems


def _judge(reference: dict, ours: dict, tmp_path, reference64: dict | None = None) -> list[str]:
    path = tmp_path / "state.pt"
    torch.save(ours, path)
    return state_problems(reference, path, lambda g, e, e64, scale: compare(g, e, e64, scale_floor=scale),
                          reference64)


def test_rounding_noise_of_a_zero_mean_running_mean_passes_and_a_missed_update_does_not(tmp_path) -> None:
    torch.manual_seed(0)
    var = 0.9 + 0.1 * (1 + 0.1 * torch.rand(128))  # 0.9 * 1 + 0.1 * the batch variance
    noise = 1e-9 * torch.randn(128)  # 0.1 * the batch mean of zero-mean activations: rounding noise
    reference = {"bn3.running_mean": noise, "bn3.running_var": var}
    # another rounding of the same cancellation: relative to itself 100% off, next to the layer's scale nothing
    assert _judge(reference, {"bn3.running_mean": -noise, "bn3.running_var": var}, tmp_path) == []
    # an update left out where the batch mean is not noise
    means = 0.1 * torch.randn(128)
    wrong = _judge({"bn.running_mean": means, "bn.running_var": var},
                   {"bn.running_mean": torch.zeros(128), "bn.running_var": var}, tmp_path)
    assert len(wrong) == 1 and wrong[0].startswith("bn.running_mean:")
    # a layer's own scale only: another layer's large variance does not loosen this one's mean
    wrong = _judge({"a.running_mean": noise, "b.running_var": 1e3 * var},
                   {"a.running_mean": -noise, "b.running_var": 1e3 * var}, tmp_path)
    assert len(wrong) == 1 and wrong[0].startswith("a.running_mean:")
    # the scale is the standard deviation, not the variance: activations of mean 1000 and std 1000 (a running
    # variance near 1e5) still fail a running mean 0.5% off
    big_var, big_mean = 0.9 + 0.1 * 1e6 * torch.ones(128), 100.0 * torch.ones(128)
    wrong = _judge({"bn.running_mean": big_mean, "bn.running_var": big_var},
                   {"bn.running_mean": big_mean * 1.005, "bn.running_var": big_var}, tmp_path)
    assert len(wrong) == 1 and wrong[0].startswith("bn.running_mean:")


def test_the_float64_state_sets_the_bound_where_pytorch_itself_is_off(tmp_path) -> None:
    """A deep layer's running variance: PyTorch's float32 value 4e-6 from the float64 model's, the candidate's
    1.9e-5 off (other summation orders through forty layers). Without the float64 state the judge assumes PyTorch
    exact and fails it; with it the bound follows PyTorch's own error. A missed update fails either way."""
    torch.manual_seed(0)
    truth = (1.0 + 0.1 * torch.rand(64)).double()
    native = (truth * (1 + 4e-6 * torch.randn(64).double())).float()
    ours = (truth * (1 + 1.9e-5 * torch.randn(64).double())).float()
    reference = {"stage3.bn.running_var": native}
    assert len(_judge(reference, {"stage3.bn.running_var": ours}, tmp_path)) == 1
    assert _judge(reference, {"stage3.bn.running_var": ours}, tmp_path, {"stage3.bn.running_var": truth}) == []
    wrong = _judge(reference, {"stage3.bn.running_var": torch.ones(64)}, tmp_path, {"stage3.bn.running_var": truth})
    assert len(wrong) == 1 and wrong[0].startswith("stage3.bn.running_var:")
