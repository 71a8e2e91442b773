"""What the parent reads off the candidate job's trial reports: the calls that ran no kernel of the candidate's own
(the recording is verify/child/launches.py's, tested in child/test_launches.py)."""

from __future__ import annotations

from kernelwright.jobs import CandidateTrial
from kernelwright.verify.judging import trials_without_own


def _trial(index: int, own_calls: int, own_device_kernels: tuple[str, ...] | None = None) -> CandidateTrial:
    return CandidateTrial(index=index, kind="random", output_types=("torch.Tensor",), outputs=(), container="tensor",
                          mutated_inputs=(), aliased_outputs=(), late_writes=(), triton_launches={},
                          extension_calls={}, own_calls=own_calls, own_device_kernels=own_device_kernels,
                          device_kernels=None if own_device_kernels is None else len(own_device_kernels), wall_s=0.0)


def test_calls_without_an_own_kernel() -> None:
    # GPU: every call profiled, device evidence decides
    assert trials_without_own([_trial(0, 0, ("k",)), _trial(1, 0, ())]) == [1]
    # CPU: only when the Python-side accounting saw an own launch on some call
    assert trials_without_own([_trial(0, 1), _trial(1, 0)]) == [1]
    assert trials_without_own([_trial(0, 0), _trial(1, 0)]) == []
