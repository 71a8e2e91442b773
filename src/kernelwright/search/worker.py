"""The tuning worker: one long-lived GPU process that times many template candidates (issue 5, "Tuning").

Started as the verifier's child job ``tune`` (same isolation: its own session, scrubbed environment, scratch
directory). It builds the reference once, then for each candidate file: imports it under a fresh module name,
builds ``ModelNew`` with the reference's weights, checks one output against the reference with the verifier's own
tolerance (float64 reference, bound relative to PyTorch's native error; a sanity check, not the verdict: finalists
get the full protocol afterwards), and times it with the verifier's own timing. Each result is
reported as it is measured. A CUDA error leaves the context unusable: the worker reports it and exits, and the
parent starts a fresh worker for the candidates left.

Only kernelwright's own template candidates are timed here, alongside the reference; any other code is judged by
``kernelwright verify`` alone, where the reference never shares its process.
"""

from __future__ import annotations

from typing import Any

from kernelwright.isolation.child import Channel, short_traceback
from kernelwright.jobs import Tuned, TuneSpec, TuneStart
from kernelwright.verify import runtime


def run_tune_job(spec: TuneSpec, channel: Channel) -> None:
    runtime.quiet_warnings()
    import torch

    from kernelwright.hardware import gpu_lock
    from kernelwright.problem.files import import_from_path
    from kernelwright.verify import compare, tensors, trials
    from kernelwright.verify.child.candidate import classify_exception
    from kernelwright.verify.child.timing import Clock, l2_flush_bytes, measure
    from kernelwright.verify.inputs import PROBLEM_MODULE, make_init_inputs, make_inputs

    device = runtime.device_of(spec.device)
    runtime.configure_precision(spec.policy)
    clock = Clock.capture()
    seed = spec.seed
    problem = import_from_path(spec.problem, PROBLEM_MODULE)
    init = make_init_inputs(problem, seed)
    torch.manual_seed(seed)
    reference = problem.Model(*init).to(device)
    state = reference.state_dict()
    sets = [tensors.to_device(make_inputs(problem, seed + i, device), device) for i in range(spec.n_sets)]
    forward_seed = trials.forward_seed(seed)
    expected, expected64 = reference_outputs(reference, sets[0], forward_seed)
    del reference
    roundoff = compare.allowed_roundoff(spec.policy)
    flush = torch.empty(l2_flush_bytes(device) // 4, dtype=torch.int32, device=device)
    timing = spec.timing

    for index, path in spec.candidates:
        gpu_lock.give_way()  # a waiting measurement goes before the next configuration
        channel.send(TuneStart(index=index))
        try:
            module = import_from_path(path, f"kernelwright_tuned_{index}")
            torch.manual_seed(seed)
            model = module.ModelNew(*init).to(device)
            model.load_state_dict(state)

            def call(i: int, model: Any = model) -> Any:
                with torch.no_grad():
                    return model(*sets[i])

            torch.manual_seed(forward_seed)  # a forward's own random draws: the reference's
            # The first call JIT-compiles the candidate's Triton kernels (host work, 1-5 s a configuration): with
            # the GPU lock let go, so a parallel bench's measurements do not wait behind the compile. Only
            # kernelwright's own templates run here (trusted); one forward may overlap another job's measurement.
            with gpu_lock.idle():
                first = call(0)
                if device.type == "cuda":
                    torch.cuda.synchronize()
            got = [o.detach().cpu() for o in tensors.flatten_outputs(first)]
            wrong = first_mismatch(got, expected, expected64, roundoff=roundoff, device_type=device.type)
            if wrong:
                channel.send(Tuned(index=index, ok=False, error=f"wrong output: {wrong}"))
                continue
            m, _ = measure(call, len(sets), clock, device=device, min_reps=timing.min_reps,
                           max_reps=timing.max_reps, target_ms=timing.target_ms, warmup_ms=timing.warmup_ms,
                           flush=flush, stable_rel=timing.stable_rel)
            channel.send(Tuned(index=index, ok=True, measurement=m))
        except Exception as exc:
            status, code = classify_exception(exc)
            channel.send(Tuned(index=index, ok=False, error=f"{status}: {type(exc).__name__}: {exc}"[:500],
                               detail=short_traceback(exc)))
            if code == "cuda-error":
                return  # the context is gone: the parent restarts a worker for the rest
        finally:
            torch.cuda.empty_cache()


def reference_outputs(reference: Any, inputs: list[Any], seed: int | None = None) -> tuple[list[Any], list[Any]]:
    """The reference's outputs in native precision, and in float64 where the model converts (else ``None`` each).

    The tuner judges against float64, as the verifier does: KernelBench's fixed tolerance rejects kernels more
    accurate than PyTorch (a bf16 LayerNorm that adds its residual in fp32 differs from PyTorch's bf16 sum by
    several ulps; on the H200, 2026-11-30, every such candidate was thrown out)."""
    import copy

    import torch

    from kernelwright.verify import tensors

    with torch.no_grad():
        if seed is not None:  # the global generator's state for a forward that draws random numbers
            torch.manual_seed(seed)
        expected = [o.detach().cpu() for o in tensors.flatten_outputs(reference(*inputs))]
        try:
            model64 = copy.deepcopy(reference).to(torch.float64)
            inputs64 = [v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                        for v in inputs]
            if seed is not None:
                torch.manual_seed(seed)
            expected64 = [o.detach().cpu() for o in tensors.flatten_outputs(model64(*inputs64))]
        except Exception:  # no float64 form: the bound falls back to PyTorch's own rounding
            expected64 = [None] * len(expected)
    return expected, expected64


def first_mismatch(got: list[Any], expected: list[Any], expected64: list[Any], *, roundoff: float,
                   device_type: str) -> str | None:
    """Why ``got`` is wrong (structure first, then values, with the verifier's tolerance), or None."""
    from kernelwright.verify import compare

    problems = compare.structure_problems(got, expected, device_type)
    if problems:
        return problems[0]
    return next((c.reason for g, e, e64 in zip(got, expected, expected64)
                 if not (c := compare.compare(g, e, e64, allowed_unit_roundoff=roundoff)).ok), None)
