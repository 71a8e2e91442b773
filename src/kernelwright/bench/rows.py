"""One bench row per problem: what the verifier said of the best kernel, in the figures a scoreboard needs.

A row is plain JSON (it is stored in the run database and written to ``results.json``; docs/bench.md has the
schema). Built from a :class:`~kernelwright.verify.records.Verdict` — the optimize winner's, or an outside
solution's — or from a failure that left no verdict.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kernelwright.records import EAGER_DEFAULTS, Severity, Status

if TYPE_CHECKING:
    from kernelwright.inspect.analysis import KernelSummary
    from kernelwright.verify.records import Verdict

# Row statuses besides the verdict's own (passed, incorrect, rejected, compile_error, runtime_error, timeout,
# crashed, unsupported):
NOT_RUN = "not-run"  # the total budget ran out first
INTERRUPTED = "interrupted"  # Ctrl-C, or the call's time limit
INPUT_ERROR = "input-error"  # the problem file itself is wrong (does not import, forward raises, ...)
NO_SOLUTION = "no-solution"  # --solutions: nothing in the folder matches this problem

BASELINES = ("eager", "compile", "compile_max_autotune")
BASELINE_LABELS = {"eager": "eager", "compile": "torch.compile", "compile_max_autotune": "max-autotune"}


def _tensor_classes(instructions: Sequence[KernelSummary]) -> list[str]:
    from kernelwright.inspect.sass import TENSOR_CLASSES, classify

    return sorted({op.split(".")[0] for k in instructions for op in k.histogram_by_opcode
                   if classify(op) in TENSOR_CLASSES})


def _instruction_mix(instructions: Sequence[KernelSummary]) -> dict[str, int]:
    mix: dict[str, int] = {}
    for kernel in instructions:
        for cls, count in kernel.histogram_by_class.items():
            mix[cls] = mix.get(cls, 0) + int(count)
    return dict(sorted(mix.items(), key=lambda kv: -kv[1]))


def _executed_tensor_classes(verdict: Verdict) -> list[str]:
    """The tensor-core opcodes of the own kernels whose MMAs executed in the profiled call (a kernel that carries
    them on a branch never taken contributes none)."""
    from kernelwright.inspect.sass import TENSOR_CLASSES, classify

    ran = {k.name for k in verdict.executed.kernels if k.own and k.executed.get("tensor_mma")}
    return sorted({op.split(".")[0] for k in verdict.instructions if k.name in ran for op in k.histogram_by_opcode
                   if classify(op) in TENSOR_CLASSES})


def _instructions(verdict: Verdict) -> tuple[list[str], dict[str, int], str]:
    """The row's tensor-core column and instruction mix, and where they come from: what executed in the profiled
    call (Nsight Compute) where one ran, else the SASS (static), saying why."""
    found = verdict.executed
    if found is not None and found.ran:
        mix: dict[str, float] = {}
        for kernel in found.kernels:
            if kernel.own:
                for cls, count in kernel.executed.items():
                    mix[cls] = mix.get(cls, 0.0) + count
        return (_executed_tensor_classes(verdict), {k: int(v) for k, v in sorted(mix.items(), key=lambda kv: -kv[1])},
                "executed")
    why = found.note if found is not None else ("no GPU: nothing ran to profile" if not verdict.median_ms()
                                                 else "not profiled")
    return _tensor_classes(verdict.instructions), _instruction_mix(verdict.instructions), f"static ({why})"


def sol_score(reference_ms: float | None, kernel_ms: float | None, floor_ms: float | None) -> float | None:
    """How much of the gap between PyTorch (eager) and the achievable floor the kernel closes, in [0, 1]: 0 is no
    faster than eager, 1 is at the floor (after SOL-ExecBench's speed-of-light score). None without the three."""
    if reference_ms is None or kernel_ms is None or floor_ms is None or reference_ms <= floor_ms:
        return None
    return max(0.0, min(1.0, (reference_ms - kernel_ms) / (reference_ms - floor_ms)))


def row_from_verdict(verdict: Verdict, *, name: str, path: str, mode: str, families: Sequence[str] = (),
                     uncovered: str = "", wall_s: float = 0.0, best_py: str | None = None,
                     report_md: str | None = None) -> dict[str, Any]:
    kernel_ms = verdict.median_ms()
    ms = {"candidate": kernel_ms, **{b: verdict.median_ms(b) for b in BASELINES}}
    speedup = {b: (ms[b] / kernel_ms if ms[b] and kernel_ms else None) for b in BASELINES}
    defaults = verdict.median_ms(EAGER_DEFAULTS)  # fp32 convolutions: eager as PyTorch's defaults run it
    if defaults:
        ms[EAGER_DEFAULTS], speedup[EAGER_DEFAULTS] = defaults, defaults / kernel_ms if kernel_ms else None
    roofline = verdict.roofline
    floor_ms = roofline.achievable_floor_ms if roofline else None
    flops, nbytes = (roofline.flops, roofline.bytes) if roofline else (None, None)
    errors = [f for f in verdict.findings if f.severity is Severity.ERROR]
    matmul_share = (roofline.matmul_flops or 0) / flops if roofline and flops else 0.0
    tensor_core, mix, source = _instructions(verdict)
    row = {
        "name": name,
        "path": path,
        "mode": mode,
        "status": str(verdict.status),
        "clean": bool(verdict.clean),
        "message": verdict.message,
        "findings": sorted({f.code for f in errors}),
        "exploit": verdict.status is Status.REJECTED,
        "notes": sorted({f.code for f in verdict.findings if f.severity is not Severity.ERROR}),
        "timed": kernel_ms is not None,
        "ms": ms,
        "speedup": speedup,
        "floor_ms": floor_ms,
        "percent_of_floor": verdict.percent_of_floor,
        "sol_score": sol_score(ms["eager"], kernel_ms, floor_ms),
        "flops": flops,
        "bytes": nbytes,
        "arithmetic_intensity": flops / nbytes if flops and nbytes else None,
        "achieved_tflops": flops / (kernel_ms * 1e9) if flops and kernel_ms else None,
        "achieved_gbs": nbytes / (kernel_ms * 1e6) if nbytes and kernel_ms else None,
        "matmul_dominant": matmul_share >= 0.5,
        "ceilings": dict(roofline.basis) if roofline else {},
        "tensor_core": tensor_core,
        "instruction_mix": mix,
        "instructions_from": source,  # "executed" (Nsight Compute's profiled call) or "static (why)"
        "families": list(families),
        "uncovered": uncovered,
        "baselines_reused": next((list(f.details.get("names", [])) for f in verdict.findings
                                  if f.code == "baselines-reused"), []),
        # Baselines not timed yet (the budget cut them, or they still compile beside the search): the row stands,
        # ``--resume`` or a later bench of this code fills them (fill_baselines).
        "pending": [],
        "baselines_later": [],  # the baselines fill_baselines filled: timed in their own job, not this verify's
        "size_overrides": dict(verdict.size_overrides or {}),
        "device": dict(verdict.device or {}).get("name"),
        "wall_s": round(wall_s, 1),
        "best_py": best_py,
        "report_md": report_md,
        "date": time.strftime("%Y-%m-%d"),
    }
    return row


def failure_row(*, name: str, path: str, mode: str, status: str, message: str, wall_s: float = 0.0,
                families: Sequence[str] = (), uncovered: str = "") -> dict[str, Any]:
    """A problem that produced no verdict: the problem is wrong, nothing matched, no template covers it, the
    budget ran out first. Still a row: a failing problem never stops the bench."""
    return {"name": name, "path": path, "mode": mode, "status": status, "clean": False, "message": message,
            "findings": [], "exploit": False, "notes": [], "timed": False,
            "ms": {"candidate": None, **dict.fromkeys(BASELINES)}, "speedup": dict.fromkeys(BASELINES),
            "floor_ms": None, "percent_of_floor": None, "sol_score": None, "flops": None, "bytes": None,
            "arithmetic_intensity": None, "achieved_tflops": None, "achieved_gbs": None, "matmul_dominant": False,
            "ceilings": {},
            "tensor_core": [], "instruction_mix": {}, "instructions_from": "", "families": list(families),
            "uncovered": uncovered,
            "baselines_reused": [], "pending": [], "baselines_later": [], "size_overrides": {}, "device": None, "wall_s": round(wall_s, 1),
            "best_py": None, "report_md": None, "date": time.strftime("%Y-%m-%d")}


def fill_baselines(row: dict[str, Any], measured_ms: dict[str, float | None]) -> dict[str, Any]:
    """``row`` with the pending baselines of ``measured_ms`` (name -> median ms; None: it failed, so it is no longer
    pending but has no speedup) filled in: their ms, their speedups over the row's kernel, the SOL score where
    eager came. The speedup is the same ratio a verify reports with a reused baseline: both sides timed the same
    way, on the same device and toolchain, in separate processes."""
    pending = list(row.get("pending") or [])
    filled = [b for b in pending if b in measured_ms]
    if not filled:
        return row
    ms, speedup = dict(row["ms"]), dict(row["speedup"])
    kernel_ms = ms.get("candidate")
    for b in filled:
        ms[b] = measured_ms[b]
        speedup[b] = ms[b] / kernel_ms if ms[b] and kernel_ms else None
    out = {**row, "ms": ms, "speedup": speedup, "pending": [b for b in pending if b not in filled],
           "baselines_later": sorted({*row.get("baselines_later", ()), *(b for b in filled if ms[b])})}
    if "eager" in filled:
        out["sol_score"] = sol_score(ms["eager"], kernel_ms, row.get("floor_ms"))
    return out
