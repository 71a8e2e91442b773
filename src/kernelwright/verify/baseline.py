"""The baseline job: eager PyTorch and ``torch.compile`` timed exactly as the candidate is (protocol rule 10),
in a process of their own, on the same input sets; plus the device's measured ceilings for the roofline."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwright.hardware import gpu_lock
from kernelwright.isolation.child import Channel, short_traceback
from kernelwright.isolation.protocol import JobError, Note
from kernelwright.jobs import BaselineResult, BaselineSpec, Ceilings, Measurement
from kernelwright.records import EAGER_DEFAULTS
from kernelwright.verify import runtime

if TYPE_CHECKING:
    from kernelwright.isolation.process import ChildRun

COMPILE_MODES = {"compile": "default", "compile_max_autotune": "max-autotune-no-cudagraphs"}
# EAGER_DEFAULTS (records.py): eager as PyTorch's defaults run it — cuDNN convolutions may use TF32
# (``torch.backends.cudnn.allow_tf32`` is True unless a user turns it off; matmuls stay IEEE). The verifier times
# eager at the problem's precision — the fair comparison — and, for an fp32 problem whose forward runs
# convolutions, this one beside it: what a user comparing with their own eager sees (issue 29: a conv at 1.25x IEEE
# eager was 0.54x this).


def runs_fp32_convolutions(model: Any, inputs: Any) -> bool:
    """Whether one forward of ``model`` calls an ATen convolution on fp32 tensors (what cuDNN's TF32 switch
    changes), seen by a dispatch mode; a forward that fails says no."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Watch(TorchDispatchMode):
        found = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's signature
            if "convolution" in func.__name__ and any(
                    isinstance(a, torch.Tensor) and a.dtype == torch.float32 for a in args):
                self.found = True
            return func(*args, **(kwargs or {}))

    watch = Watch()
    try:
        with torch.no_grad(), watch:
            model(*inputs)
    except Exception:  # noqa: BLE001 - the eager baseline reports a forward that fails
        return False
    return watch.found


def run_baseline_job(spec: BaselineSpec, channel: Channel) -> None:
    runtime.quiet_warnings()
    import torch

    from kernelwright.problem import sizes
    from kernelwright.problem.files import import_from_path
    from kernelwright.verify import tensors
    from kernelwright.verify.child.timing import Clock, l2_flush_bytes, measure
    from kernelwright.verify.inputs import PROBLEM_MODULE, make_init_inputs

    device = runtime.device_of(spec.device)
    runtime.configure_precision(spec.policy)
    clock = Clock.capture()
    shared = Path(spec.shared_dir)
    timing = spec.timing
    module = import_from_path(spec.problem, PROBLEM_MODULE)
    sizes.apply(module, spec.size_overrides)
    init_inputs = make_init_inputs(module, spec.init_seed)
    state = torch.load(shared / "state.pt", map_location="cpu", weights_only=True)
    sets = [tensors.to_device(tensors.load(shared / f"inputs-{i}.pt"), device) for i in spec.input_sets]
    flush = torch.empty(l2_flush_bytes(device) // 4, dtype=torch.int32, device=device)

    if spec.calibrate:
        try:
            from kernelwright.hardware.calibration import measured_ceilings

            ceilings = measured_ceilings(device.index or 0)
            channel.send(Ceilings(ceilings=ceilings.to_json() if hasattr(ceilings, "to_json") else ceilings))
        except Exception as exc:
            channel.send(Note(code="calibration-failed",
                              message=f"measuring the device's ceilings failed: {type(exc).__name__}: {exc}"))

    def fresh_model() -> torch.nn.Module:
        torch.manual_seed(spec.init_seed)
        model = module.Model(*init_inputs).to(device)
        model.load_state_dict(state)
        return model

    # Eager first when asked for (the verifier leaves out what kernelwright bench's cache already holds).
    variants = [name for name in ("eager", EAGER_DEFAULTS, *COMPILE_MODES) if name in spec.variants]
    for name in variants:
        gpu_lock.give_way()  # a waiting measurement goes before the next baseline
        try:
            model = fresh_model()
            if name == EAGER_DEFAULTS:
                if spec.policy.allow_tf32 or not runs_fp32_convolutions(model, sets[0]):
                    continue  # the same as eager: nothing to time twice
                torch.backends.cudnn.allow_tf32 = True
            elif name in COMPILE_MODES:
                torch._dynamo.reset()
                model = torch.compile(model, mode=COMPILE_MODES[name])

            def call(i: int, model: Any = model) -> Any:
                with torch.no_grad():
                    return model(*sets[i])

            # Compile, autotune and warm up outside the measurement. Inductor benchmarks its kernels' configs on
            # the first calls: with other jobs on the device (a parallel bench) that would pick configs on a busy
            # GPU, so each of those benchmarks has the device to itself (or, where they cannot be reached, the
            # whole warm-up does).
            compiled = name in COMPILE_MODES
            whole = compiled and not gpu_lock.hook_inductor_benchmarks()
            with gpu_lock.exclusive() if whole else contextlib.nullcontext():
                if compiled and not whole:
                    # The compile is host work (tracing, code generation, Triton builds: 10-60 s) and was a
                    # shared hold that every measurement of a parallel bench waited behind. It runs with the lock
                    # let go; its benchmarks still take it exclusively (hooked above), and what may overlap
                    # another job's measurement is this first forward alone: trusted code (PyTorch compiling
                    # the problem's own Model), one call among that measurement's hundreds.
                    with gpu_lock.idle():
                        call(0)
                        torch.cuda.synchronize()
                for i in range(len(sets)):
                    call(i)
                torch.cuda.synchronize()
            m, _ = measure(call, len(sets), clock, device=device, min_reps=timing.min_reps,
                           max_reps=timing.max_reps, target_ms=timing.target_ms, warmup_ms=timing.warmup_ms,
                           flush=flush, stable_rel=timing.stable_rel)
            channel.send(BaselineResult(name=name, measurement=m))
        except Exception as exc:
            channel.send(BaselineResult(name=name, measurement=None,
                                        error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                                        detail=short_traceback(exc)))
        finally:
            runtime.configure_precision(spec.policy)  # EAGER_DEFAULTS's switch back to the problem's precision
            torch._dynamo.reset()
            torch.cuda.empty_cache()


# -- the parent's side ------------------------------------------------------------------------------------------
_CONVOLUTION = re.compile(r"\bconv(?:_transpose)?[123]d\b|\bConv(?:Transpose)?[123]d\b|\bconvolution\b")


def mentions_convolution(problem: Path) -> bool:
    """Whether a problem file calls a convolution by any of PyTorch's names (the plan's cheap test; the baseline
    job's dispatch check is the exact one)."""
    try:
        return bool(_CONVOLUTION.search(problem.read_text(errors="replace")))
    except OSError:
        return False


def plan_baselines(opts: Any, judge: Any, *, device: str = "cpu",
                   convolutions: bool = False) -> tuple[list[str], dict[str, Measurement]]:
    """(the baselines to time, those reused from ``opts.reuse_baselines`` — a measurement's JSON or the record);
    a note in ``judge`` for the reused. Eager at PyTorch's defaults joins eager on a GPU where the problem has
    ``convolutions`` and its policy keeps TF32 off (otherwise the two are one)."""
    variants = ["eager"]
    if device.startswith("cuda") and convolutions and not opts.policy.allow_tf32:
        variants.append(EAGER_DEFAULTS)
    if opts.compile_baseline:
        variants += [m for m in COMPILE_MODES if opts.compile_modes is None or m in opts.compile_modes]
    reused = {name: Measurement.from_json(m) for name, m in (opts.reuse_baselines or {}).items()
              if name in variants and m}
    if reused:
        from kernelwright.records import Severity

        judge.add("baselines-reused", f"{', '.join(sorted(reused))} timing(s) reused from an earlier measurement on "
                  "this device and toolchain (kernelwright bench's baseline cache)", Severity.NOTE,
                  names=sorted(reused))
    return [v for v in variants if v not in reused], reused


def collect_baselines(run: ChildRun, reused: dict[str, Measurement], judge: Any, *,
                      budget_cut: bool) -> tuple[dict[str, Measurement | None], dict[str, Any] | None]:
    """(the baselines' measurements by name, the device's ceilings if the job reported them)."""
    from kernelwright.records import Severity

    found: dict[str, Measurement | None] = dict(reused)
    for result in run.reports(BaselineResult):
        found[result.name] = result.measurement
        if result.error:
            judge.add("baseline-failed", f"{result.name} baseline failed: {result.error}", Severity.NOTE)
    error = run.report(JobError)
    if error is not None:  # the job itself failed before or between the baselines (their results say the rest)
        judge.add("baseline-failed", f"the baseline job failed: {error.message}", Severity.NOTE)
    elif not run.finished and budget_cut:
        judge.add("baselines-cut", "the budget ran out while timing the baselines: the speedups are unknown; give "
                  "the run more time (--budget, or bench's --verify-limit)", Severity.NOTE)
    elif not run.finished:
        judge.add("baseline-failed", f"the baseline process {run.describe_exit()}", Severity.NOTE)
    ceilings = run.report(Ceilings)
    return found, (ceilings.ceilings if ceilings else None)


def cached_ceilings(device_name: Any) -> dict[str, Any] | None:
    """The device's calibrated ceilings from the calibration cache, when no baseline job ran to report them."""
    if not device_name:
        return None
    try:
        from kernelwright.hardware.calibration import installed_torch_version, load_cached_ceilings

        cached = load_cached_ceilings(str(device_name), torch_version=installed_torch_version())
    except Exception:  # noqa: BLE001 - the roofline then uses the knowledge base's figures
        return None
    if cached is None:
        return None
    return cached.to_json() if hasattr(cached, "to_json") else cached
