"""Module state: the buffers a problem's forward changes in place (a training-mode batch norm's running statistics
and batch count). The reference child writes those its first trial changed (``trials.STATE_FILE`` in its private
directory), the candidate child all of its module's buffers after its first trial, and the parent compares them
here: a candidate whose outputs are right but whose module is left as it was is not what the problem computes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def state_problems(reference: Mapping[str, Any], path: Path, compare: Callable[[Any, Any, Any, float], Any],
                   reference64: Mapping[str, Any] | None = None) -> list[str]:
    """What differs between the candidate's buffers (the file at ``path``) and the reference's changed ones: one
    line each, empty when they agree. ``compare(got, expected, expected64, scale)`` judges floating values as outputs
    are judged (its result has ``ok`` and ``reason``) against the float64 model's buffers where ``reference64`` has
    them (PyTorch's own error in them then sets the bound: 26_ShuffleNet's deepest running variances carry forty
    layers' rounding, 1.2e-7 of error being too strict a measure of the arithmetic), and ``scale`` a floor for the
    magnitude errors are measured against: a
    batch norm's ``running_mean`` is judged against its layer's standard deviation (the square root of the RMS of
    its ``running_var``), since the mean of zero-mean activations (a batch norm after a linear map of batch-normed
    channels: ShuffleNet's `bn3`) is rounding noise whose own RMS says nothing of the arithmetic that made it; other
    buffers get no floor. Integer buffers (a batch count) must be equal."""
    import torch

    try:
        ours = torch.load(path, map_location="cpu", weights_only=True)  # the candidate wrote it: data only
    except Exception as exc:  # noqa: BLE001 - a missing or unreadable file is the candidate's
        return [f"its buffers after the first trial could not be read back ({type(exc).__name__})"]
    if not isinstance(ours, dict):
        return ["its buffers after the first trial are not a name -> tensor mapping"]
    scales: dict[str, float] = {}
    for name in reference:
        module, _, leaf = name.rpartition(".")
        var = reference.get(f"{module}.running_var" if module else "running_var")
        if leaf == "running_mean" and isinstance(var, torch.Tensor) and var.is_floating_point() and var.numel():
            std = float(var.double().pow(2).mean().sqrt().sqrt())
            if std == std:  # not NaN
                scales[name] = std
    wrong = []
    for name, want in reference.items():
        got = ours.get(name)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            wrong.append(f"{name} is {'missing' if got is None else 'of another shape'}")
        elif want.is_floating_point():
            result = compare(got.to(want.dtype), want, (reference64 or {}).get(name), scales.get(name, 0.0))
            if not result.ok:
                wrong.append(f"{name}: {result.reason}")
        elif not torch.equal(got, want):
            wrong.append(f"{name} is {got.flatten()[:4].tolist()}, the reference's {want.flatten()[:4].tolist()}")
    return wrong
