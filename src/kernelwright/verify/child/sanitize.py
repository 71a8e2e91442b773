"""The bodies of the jobs that run the candidate's forward under a tool wrapping this process: compute-sanitizer
(``sanitize``: one forward) and Nsight Compute (``profile``: a warm-up forward, then one inside an NVTX range).

Runs beside the candidate's code (see verify/child/__init__.py): what the tool saw is in its own output, which the
parent reads and judges (verify/sanitize.py: ``run_tool``, ``parse``, ``judge``; verify/executed.py); this side only
builds the models, runs the calls and reports that they finished (:class:`~kernelwright.jobs.SanitizeRan`).
"""

from __future__ import annotations

import time
from typing import Any

from kernelwright.isolation.child import Channel
from kernelwright.jobs import PROFILE_RANGE, ProfileSpec, SanitizeRan, SanitizeSpec
from kernelwright.jobs.sanitize import ForwardFields


def _build(spec: ForwardFields, max_elements: int) -> tuple[Any, list[Any], Any, dict[str, int]]:
    """The candidate's ``ModelNew`` with the reference model's weights, seeded inputs, the device, the sizes used."""
    import torch

    from kernelwright.problem import sizes
    from kernelwright.problem.files import import_from_path, read_problem
    from kernelwright.verify import runtime, tensors
    from kernelwright.verify.inputs import PROBLEM_MODULE, make_init_inputs, make_inputs

    runtime.quiet_warnings()
    device = runtime.device_of(spec.device)
    overrides = dict(spec.size_overrides)
    if not overrides and max_elements > 0:
        overrides = sizes.reduced_sizes(read_problem(spec.problem), max_elements=max_elements)
    problem = import_from_path(spec.problem, PROBLEM_MODULE)
    sizes.apply(problem, overrides)
    candidate = import_from_path(spec.candidate, "kernelwright_candidate")
    init = make_init_inputs(problem, spec.seed)
    torch.manual_seed(spec.seed)
    reference = problem.Model(*init).to(device)
    torch.manual_seed(spec.seed)
    model = candidate.ModelNew(*init).to(device)
    model.load_state_dict(reference.state_dict(), strict=False)
    del reference
    inputs = tensors.to_device(make_inputs(problem, spec.seed + 1, device), device)
    return model, inputs, device, overrides


def run_sanitize_job(spec: SanitizeSpec, channel: Channel) -> None:
    """The candidate's forward, once, on seeded inputs at reduced sizes, with the reference model's weights."""
    import torch

    from kernelwright.verify import runtime

    model, inputs, device, overrides = _build(spec, spec.max_elements)
    started = time.perf_counter()
    with torch.no_grad():
        model(*inputs)
    runtime.synchronize(device)
    channel.send(SanitizeRan(seconds=time.perf_counter() - started, sizes=overrides))


def run_profile_job(spec: ProfileSpec, channel: Channel) -> None:
    """A warm-up forward (Triton compiles and autotunes there), then the profiled one inside the NVTX range that
    Nsight Compute is told to profile, at the verify's sizes."""
    import torch

    from kernelwright.verify import runtime

    model, inputs, device, overrides = _build(spec, 0)
    with torch.no_grad():
        model(*inputs)
        runtime.synchronize(device)
        started = time.perf_counter()
        nvtx = torch.cuda.nvtx if device.type == "cuda" else None
        if nvtx is not None:
            nvtx.range_push(PROFILE_RANGE)
        try:
            model(*inputs)
            runtime.synchronize(device)
        finally:
            if nvtx is not None:
                nvtx.range_pop()
    channel.send(SanitizeRan(seconds=time.perf_counter() - started, sizes=overrides))
