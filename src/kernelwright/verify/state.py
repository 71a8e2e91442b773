"""Module state: the buffers a problem's forward changes in place (a training-mode batch norm's running statistics
and batch count). The reference child writes those its first trial changed (``trials.STATE_FILE`` in its private
directory), the candidate child all of its module's buffers after its first trial, and the parent compares them
here: a candidate whose outputs are right but whose module is left as it was is not what the problem computes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def state_problems(reference: Mapping[str, Any], path: Path, compare: Callable[[Any, Any], Any]) -> list[str]:
    """What differs between the candidate's buffers (the file at ``path``) and the reference's changed ones: one
    line each, empty when they agree. ``compare(got, expected, scale)`` judges floating values as outputs are judged
    (its result has ``ok`` and ``reason``), ``scale`` the largest RMS among the changed floating buffers of the same
    module: a running mean is judged on the scale of its layer's running variance too, since the mean of zero-mean
    activations (a batch norm after a linear map of batch-normed channels: ShuffleNet's `bn3`) is rounding noise
    whose RMS says nothing of the arithmetic that made it; integer buffers (a batch count) must be equal."""
    import torch

    try:
        ours = torch.load(path, map_location="cpu", weights_only=True)  # the candidate wrote it: data only
    except Exception as exc:  # noqa: BLE001 - a missing or unreadable file is the candidate's
        return [f"its buffers after the first trial could not be read back ({type(exc).__name__})"]
    if not isinstance(ours, dict):
        return ["its buffers after the first trial are not a name -> tensor mapping"]
    scales: dict[str, float] = {}
    for name, want in reference.items():
        if isinstance(want, torch.Tensor) and want.is_floating_point() and want.numel():
            module = name.rpartition(".")[0]
            rms = float(want.double().pow(2).mean().sqrt())
            if rms == rms:  # not NaN
                scales[module] = max(scales.get(module, 0.0), rms)
    wrong = []
    for name, want in reference.items():
        got = ours.get(name)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            wrong.append(f"{name} is {'missing' if got is None else 'of another shape'}")
        elif want.is_floating_point():
            result = compare(got.to(want.dtype), want, scales.get(name.rpartition(".")[0], 0.0))
            if not result.ok:
                wrong.append(f"{name}: {result.reason}")
        elif not torch.equal(got, want):
            wrong.append(f"{name} is {got.flatten()[:4].tolist()}, the reference's {want.flatten()[:4].tolist()}")
    return wrong
