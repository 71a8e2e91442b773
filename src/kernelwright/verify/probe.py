"""Prove that a problem file runs — in the verifier's isolated child, because the file may be untrusted (an LLM
wrote it for ``kernelwright generate``).

The child imports the problem, builds ``Model(*get_init_inputs())``, runs it once on ``get_inputs()`` and checks
that every output is a tensor and every floating-point output is finite. On the CPU it also works out the reduced
sizes the interpreter will check candidates at (:func:`kernelwright.problem.sizes.reduced_sizes`), so nothing of the
file ever runs in the calling process.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from kernelwright.isolation.child import Channel
from kernelwright.isolation.protocol import JobError
from kernelwright.jobs import ProbeResult, ProbeSpec


def probe_problem(path: str | Path, *, device: str, timeout_s: float = 300.0,
                  max_elements: int = 1 << 18) -> ProbeResult:
    from kernelwright.isolation.process import run_child

    workdir = Path(tempfile.mkdtemp(prefix="kernelwright-probe-"))
    try:
        spec = ProbeSpec(problem=str(Path(path).resolve()), device=device, max_elements=max_elements)
        run = run_child("probe", spec, workdir=workdir, timeout_s=timeout_s, device=device)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    error = run.report(JobError)
    result = run.report(ProbeResult)
    if error is not None:
        return ProbeResult(ok=False, message=error.message)
    if result is None:
        lines = [line for line in run.stderr_tail.splitlines() if line.strip()]
        return ProbeResult(ok=False, message=f"the problem's process {run.describe_exit()}"
                                             + (f": {lines[-1][:200]}" if lines else ""))
    return result


def run_probe_job(spec: ProbeSpec, channel: Channel) -> None:
    import torch

    from kernelwright.problem.files import import_from_path, read_problem
    from kernelwright.problem.sizes import reduced_sizes
    from kernelwright.verify import runtime, tensors
    from kernelwright.verify.inputs import PROBLEM_MODULE, make_init_inputs, make_inputs

    runtime.quiet_warnings()
    device = runtime.device_of(spec.device)
    problem = read_problem(spec.problem)  # the static checks first: Model, get_inputs
    module = import_from_path(spec.problem, PROBLEM_MODULE)
    started = time.perf_counter()
    init = make_init_inputs(module, 0)
    torch.manual_seed(0)
    model = module.Model(*init).to(device)
    inputs = tensors.to_device(make_inputs(module, 1, device), device)
    with torch.no_grad():
        outputs = tensors.flatten_outputs(model(*inputs))
    runtime.synchronize(device)
    seconds = time.perf_counter() - started
    described, problems = [], []
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            problems.append(f"output {i} is a {type(out).__name__}, not a tensor")
            continue
        described.append(tensors.describe(out))
        if out.is_floating_point() and not bool(torch.isfinite(out).all()):
            problems.append(f"output {i} has NaN or inf")
    if not outputs:
        problems.append("the forward returned no output")
    reduced = {}
    if not problems and device.type == "cpu":
        reduced = reduced_sizes(problem, max_elements=spec.max_elements)
    message = "; ".join(problems) if problems else (
        f"ran on {device.type} in {seconds:.2f} s: " + ", ".join(d.text() for d in described))
    channel.send(ProbeResult(ok=not problems, message=message, outputs=tuple(described), reduced_sizes=reduced,
                             seconds=seconds))
