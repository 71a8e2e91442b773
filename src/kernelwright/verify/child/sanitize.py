"""The sanitize job's body: the candidate's forward, once, under compute-sanitizer (which wraps this process).

Runs beside the candidate's code (see verify/child/__init__.py): what the tool saw is in its own output, which the
parent reads and judges (verify/sanitize.py: ``run_tool``, ``parse``, ``judge``); this side only builds the models,
runs the call and reports that it finished (:class:`~kernelwright.jobs.SanitizeRan`).
"""

from __future__ import annotations

import time

from kernelwright.isolation.child import Channel
from kernelwright.jobs import SanitizeRan, SanitizeSpec


def run_sanitize_job(spec: SanitizeSpec, channel: Channel) -> None:
    """The candidate's forward, once, on seeded inputs at reduced sizes, with the reference model's weights."""
    import torch

    from kernelwright.problem import sizes
    from kernelwright.problem.files import import_from_path, read_problem
    from kernelwright.verify import runtime, tensors
    from kernelwright.verify.inputs import PROBLEM_MODULE, make_init_inputs, make_inputs

    runtime.quiet_warnings()
    device = runtime.device_of(spec.device)
    overrides = dict(spec.size_overrides)
    if not overrides and spec.max_elements > 0:
        overrides = sizes.reduced_sizes(read_problem(spec.problem), max_elements=spec.max_elements)
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
    started = time.perf_counter()
    with torch.no_grad():
        model(*inputs)
    runtime.synchronize(device)
    channel.send(SanitizeRan(seconds=time.perf_counter() - started, sizes=overrides))
