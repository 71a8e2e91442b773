"""Smaller versions of a problem, for proving candidates on the CPU.

KernelBench problems size themselves with module-level integer constants (``batch_size = 4096``). Under the Triton
interpreter a realistic GPU size can take hours, so the CPU path of ``optimize`` checks the same problem with its
large *input-only* constants (those the constructor does not see, so the weights and any number derived from them
stay exactly the ones the candidate was generated for) divided by one common factor — relations between them
survive — the smallest factor that brings the inputs under an element budget and still lets the reference run.
Candidates must be shape-generic anyway: the verifier also runs a second shape.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kernelwright.problem.files import ProblemFile, import_from_path

log = logging.getLogger(__name__)

SHRINKABLE_MIN = 64  # constants below this are structure (heads, kernel sizes, groups), not size
FACTORS = tuple(2**i for i in range(13))  # 1 .. 4096


def _shrink(value: int, factor: int) -> int:
    if value < SHRINKABLE_MIN or factor == 1:
        return value
    return max(8, value // factor)


def apply(module: Any, overrides: Mapping[str, int]) -> None:
    for name, value in overrides.items():
        setattr(module, name, int(value))


def _input_elements(module: Any) -> int:
    import torch

    torch.manual_seed(0)
    total = 0
    for value in module.get_inputs():
        if isinstance(value, torch.Tensor):
            total += value.numel()
    return total


def _init_signature(module: Any) -> list[Any]:
    """The constructor's arguments, comparable: tensors by shape, everything else by value."""
    import torch

    torch.manual_seed(0)
    values = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
    return [("tensor", tuple(v.shape)) if isinstance(v, torch.Tensor) else v for v in values]


def _input_only(module: Any, original: Mapping[str, int]) -> list[str]:
    """Size constants that change the inputs but not the constructor's arguments, and that the reference still
    runs with when changed alone. Only these may shrink: the model (its weights, and numbers such as
    ``alpha = K ** -0.5`` that a kernel may have baked in) stays the one the candidate was generated for, and a size
    the forward fixes (a generated backward's ``layer_norm(x, [4096])``) stays too."""
    base = _init_signature(module)
    free = []
    for name, value in original.items():
        if value < SHRINKABLE_MIN:
            continue
        apply(module, {**original, name: value // 2})
        try:
            if _init_signature(module) == base and _runs_on_meta(module):
                free.append(name)
        except Exception:
            pass
        finally:
            apply(module, original)
    return free


def _runs_on_meta(module: Any) -> bool:
    """Whether the reference accepts the inputs of the module's current sizes (shapes checked on the meta device,
    no arithmetic); True where an operator has no meta kernel (undecided: the factor search runs it for real)."""
    import torch

    torch.manual_seed(0)
    init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
    inputs = [v.to("meta") if isinstance(v, torch.Tensor) else v for v in module.get_inputs()]
    try:
        with torch.device("meta"):
            model = module.Model(*init)
        with torch.no_grad():
            model(*inputs)
    except NotImplementedError:
        return True
    except Exception as exc:  # noqa: BLE001 - a shape error, whatever its type
        log.debug("the reference does not run on meta tensors: %s", exc)
        return False
    return True


def reduced_sizes(problem: ProblemFile, *, max_elements: int = 1 << 18) -> dict[str, int]:
    """Overrides for the problem's input-only size constants that bring its inputs to at most ``max_elements``
    elements (or as close as they allow) and keep the reference runnable and finite; {} if it is small already or
    nothing can shrink."""
    import torch

    module = import_from_path(problem.path, "kernelwright_sized_problem")
    original = dict(problem.size_globals)
    try:
        if _input_elements(module) <= max_elements:
            return {}
        free = _input_only(module, original)
        best: dict[str, int] = {}
        for factor in FACTORS[1:]:
            overrides = {k: _shrink(original[k], factor) for k in free if _shrink(original[k], factor) != original[k]}
            if not overrides:
                continue
            apply(module, {**original, **overrides})
            try:
                torch.manual_seed(0)
                init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
                model = module.Model(*init)
                torch.manual_seed(0)
                with torch.no_grad():
                    out = model(*module.get_inputs())
                outs = out if isinstance(out, (tuple, list)) else [out]
                if not all(not o.is_floating_point() or bool(torch.isfinite(o).all()) for o in outs):
                    continue
                best = overrides
                if _input_elements(module) <= max_elements:
                    return best
            except Exception as exc:  # this factor breaks the problem: try the next
                log.info("sizes divided by %d do not work for %s: %s", factor, problem.path.name, exc)
        return best
    finally:
        apply(module, original)
