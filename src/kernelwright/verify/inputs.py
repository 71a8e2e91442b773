"""A problem's inputs, made the one way every job makes them: ``get_inputs()`` and ``get_init_inputs()`` under a
seed, the module imported as :data:`PROBLEM_MODULE`. Shared by the reference, baseline, probe and tune jobs and the
sanitize job beside the candidate (verify/child/sanitize.py), so it imports nothing of either side.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelwright.isolation.child import JobFailure, short_traceback

PROBLEM_MODULE = "kernelwright_problem"


def problem_failure(what: str, exc: BaseException) -> JobFailure:
    """The job's failure where the problem's own code raised (``problem-error``: the problem, not the candidate)."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return JobFailure("problem_error", "problem-error", f"{what} raised {type(exc).__name__}: {first}".rstrip(": "),
                      detail=short_traceback(exc))


def make_inputs(module: Any, seed: int, device: torch.device | str | None = None) -> list[Any]:
    """``get_inputs()`` under ``seed``; with ``device``, its tensor factories default to that device (a gigabyte of
    ``torch.rand`` takes a CPU seconds and a GPU a millisecond; "meta" gives shapes only). A ``get_inputs`` that
    fails there is run again on the CPU, and its error, if any, is the CPU run's."""
    if device is not None and torch.device(device).type != "cpu":
        torch.manual_seed(seed)
        try:
            with torch.device(device):
                values = module.get_inputs()
            if isinstance(values, (list, tuple)):
                return list(values)
        except Exception:
            pass
    torch.manual_seed(seed)
    try:
        values = module.get_inputs()
    except Exception as exc:
        raise problem_failure("the problem's get_inputs()", exc) from exc
    if not isinstance(values, (list, tuple)):
        raise JobFailure("problem_error", "problem-error",
                         f"the problem's get_inputs() returned a {type(values).__name__}; it must return a list")
    return list(values)


def make_init_inputs(module: Any, seed: int) -> list[Any]:
    if not hasattr(module, "get_init_inputs"):
        return []
    torch.manual_seed(seed)
    try:
        values = module.get_init_inputs()
    except Exception as exc:
        raise problem_failure("the problem's get_init_inputs()", exc) from exc
    return list(values) if isinstance(values, (list, tuple)) else [values]
