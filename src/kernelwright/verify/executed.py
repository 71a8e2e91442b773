"""Executed-instruction evidence (issue 44): what the candidate's kernels *ran*, not only what they compiled to.

A verdict's instruction section comes from the SASS (static): a kernel that carries HGMMA, UTMALDG or a TF32 MMA on
a branch that never runs would be reported as using them. So on a GPU every passed candidate gets one more call of
its forward, outside the timed runs, under Nsight Compute:

    ncu --csv --page raw --metrics sass__inst_executed_per_opcode,... --nvtx --nvtx-include kernelwright-forward/
        python -m kernelwright.isolation.child profile SPEC FD

The ``profile`` job (verify/child/sanitize.py) builds the model as the sanitize job does, calls it once to warm up
(Triton compiles and autotunes there, outside the profiled range) and once inside the NVTX range; only that call's
kernels are profiled, with the few metrics the evidence needs (executed SASS per opcode, the same with a true
predicate where ncu has it, device time, spills). Per kernel the evidence counts, by class — tensor-core MMA (by
generation and operand type), TMA and bulk copies, cp.async, mbarrier waits, global loads and stores, local memory
— the instructions present in its SASS and those executed, and each kernel's share of the call's device time.

Findings: ``dead-instruction-claim`` (a claimed class — tensor-core MMA, TMA, cp.async — in an own kernel's SASS
that never executed in the profiled call) and ``executed-precision-below-problem`` (an own kernel's executed MMAs
take operands narrower than the problem's precision allows, without split-precision evidence: the static precision
check, asked only of the kernels whose MMAs ran). A machine without ncu, without permission to read the counters, a
profiler that fails or runs past its limit: a one-line note (``executed-unavailable``) and the static view; the rest
of the verdict is unchanged. Thousands of launches are bounded by ``--launch-count``.

What the evidence rests on: ncu's CSV, written by the tool that wraps the candidate's process, to the job's output,
which the candidate's process shares. A candidate could print rows of its own among them; the evidence is for
kernels that mean well and claim too much (the realistic case: a fast path never taken), not proof against a
forger — correctness and timing never rest on it.
"""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kernelwright.records import ProblemTraits, Severity
from kernelwright.verify.records import EXECUTED_CLASSES as CLASSES
from kernelwright.verify.records import ExecutedEvidence, ExecutedKernelRow

if TYPE_CHECKING:
    from kernelwright.inspect.analysis import KernelSummary
    from kernelwright.inspect.ncu import ExecutedKernel
    from kernelwright.verify.findings import Judge

# The classes a candidate's speed is claimed on (the instruction section names them): present but never executed is
# a dead claim.
CLAIMED = ("tensor_mma", "tma", "cp_async")
METRICS = (
    "sass__inst_executed_per_opcode",
    "sass__thread_inst_executed_true_per_opcode",
    "gpu__time_duration.sum",
    "sass__inst_executed_register_spilling",
)
PRED_TRUE = "sass__thread_inst_executed_true_per_opcode"
LAUNCH_LIMIT = 500  # kernels profiled at most (a forward of thousands of launches stays bounded)


def _by_class(counts: Mapping[str, float]) -> dict[str, float]:
    from kernelwright.inspect.sass import classify

    sass_to_ours = {c: name for name, members in CLASSES.items() for c in members}
    out: dict[str, float] = {}
    for opcode, n in counts.items():
        ours = sass_to_ours.get(classify(opcode))
        if ours:
            out[ours] = out.get(ours, 0.0) + n
    return out


def _executed_mma_types(run: ExecutedKernel, static: KernelSummary | None) -> dict[str, float]:
    """Operand type -> MMA instructions executed: from the executed opcode where it carries its type modifiers,
    else from the kernel's SASS (its MMAs' types, shared out in proportion)."""
    from kernelwright.inspect.sass import TENSOR_CLASSES, classify, mma_operand_type

    out: dict[str, float] = {}
    for opcode, n in run.opcode_counts.items():
        if classify(opcode) not in TENSOR_CLASSES or not n:
            continue
        if "." in opcode:
            kind = mma_operand_type(opcode) or "unknown"
            out[kind] = out.get(kind, 0.0) + n
            continue
        types = dict(static.mma_types) if static is not None else {}
        total = sum(types.values())
        if not total:
            out["unknown"] = out.get("unknown", 0.0) + n
            continue
        for kind, count in types.items():
            out[kind] = out.get(kind, 0.0) + n * count / total
    return out


def _matches(static_name: str, executed_name: str) -> bool:
    return executed_name == static_name or executed_name.split("(")[0] == static_name


def evidence(static: Sequence[KernelSummary], executed: Sequence[ExecutedKernel], *, seconds: float = 0.0
             ) -> ExecutedEvidence:
    """The executed section from ncu's launches (merged per kernel) and the own kernels' SASS summaries (of the arch
    the call ran on)."""
    from kernelwright.inspect.ncu import merge_launches

    merged = merge_launches(executed)
    total = sum(k.metrics.get("gpu__time_duration.sum", 0.0) for k in merged)
    rows = []
    for run in merged:
        summary = next((s for s in static if _matches(s.name, run.name)), None)
        duration = run.metrics.get("gpu__time_duration.sum")
        present = {}
        if summary is not None:
            present = {name: sum(summary.histogram_by_class.get(c, 0) for c in members)
                       for name, members in CLASSES.items()}
            present = {k: v for k, v in present.items() if v}
        rows.append(ExecutedKernelRow(
            name=run.name, own=summary is not None, launches=run.launches, duration_ns=duration,
            share=(duration / total) if duration is not None and total > 0 else None,
            executed=_by_class(run.opcode_counts), predicated_true=_by_class(run.instanced.get(PRED_TRUE, {})),
            present=present, mma_types=_executed_mma_types(run, summary)))
    # Own kernels compiled but not launched by the profiled call: their SASS is present, nothing of it executed.
    for summary in static:
        if not any(_matches(summary.name, r.name) for r in rows):
            present = {name: sum(summary.histogram_by_class.get(c, 0) for c in members)
                       for name, members in CLASSES.items()}
            rows.append(ExecutedKernelRow(name=summary.name, own=True, launches=0, duration_ns=0.0, share=0.0,
                                          present={k: v for k, v in present.items() if v}))
    return ExecutedEvidence(ran=True, seconds=round(seconds, 2), kernels=tuple(rows))


def judge_evidence(judge: Judge, found: ExecutedEvidence, static: Sequence[KernelSummary],
                   traits: ProblemTraits | None) -> None:
    """The findings the executed view adds (module docstring)."""
    if not found.ran:
        return
    counted = any(k.executed for k in found.kernels) or not any(k.launches for k in found.kernels)
    if not counted:
        judge.add("executed-unavailable", "Nsight Compute gave no per-opcode counts for the profiled call: the "
                  "instruction section stays the SASS's (static)", Severity.NOTE)
        return
    for row in found.kernels:
        if not row.own:
            continue
        dead = [c for c in CLAIMED if row.present.get(c) and not row.executed.get(c)]
        if dead:
            what = ", ".join(f"{row.present[c]} {_LABEL[c]}" for c in dead)
            where = ("the kernel was never launched by the profiled call" if not row.launches
                     else f"none executed in {row.launches} launch(es) of the profiled call")
            judge.add("dead-instruction-claim", f"{row.name}: {what} instruction(s) in its SASS, {where}: the "
                      "instruction section's claim does not hold for what ran", Severity.WARNING, kernel=row.name,
                      instruction_classes=dead, present={c: row.present[c] for c in dead}, launches=row.launches)
    if traits is None:
        return
    from kernelwright.inspect.expectations import precision_findings

    for row in found.kernels:
        if not (row.own and row.executed.get("tensor_mma")):
            continue
        summary = next((s for s in static if _matches(s.name, row.name)), None)
        if summary is None:
            continue
        for f in precision_findings(summary, traits):
            if f.severity is Severity.NOTE:
                continue  # allowed by the policy, or split-precision (3xTF32) emulation
            types = ", ".join(f"{k} {v:.0f}" for k, v in sorted(row.mma_types.items())) or "unknown types"
            judge.add("executed-precision-below-problem",
                      f"{row.name}: {row.executed['tensor_mma']:.0f} MMA instructions executed ({types}) in a "
                      f"{traits.compute_dtype} problem ({f.code}: {f.message})", f.severity, kernel=row.name,
                      static_code=f.code, mma_types=dict(row.mma_types))


_LABEL = {"tensor_mma": "tensor-core MMA", "tma": "TMA / bulk-copy", "cp_async": "cp.async"}


def parse_launches(text: str) -> list[ExecutedKernel]:
    """ncu's raw CSV (among the program's own output) -> one record per profiled launch."""
    from kernelwright.inspect.ncu import parse_raw_csv

    return parse_raw_csv(text)


def find_profiler() -> str | None:
    """ncu (Nsight Compute), or None where this machine has none."""
    from kernelwright.errors import ToolchainError
    from kernelwright.inspect.ncu import find_ncu

    try:
        return str(find_ncu())
    except ToolchainError:
        return None


def profile(problem: str | Path, candidate: str | Path, *, device: str, seed: int,
            size_overrides: Mapping[str, int] | None, timeout_s: float, static: Sequence[KernelSummary],
            tool_path: str | None = None) -> ExecutedEvidence:
    """The candidate's forward once under ncu, in a ``profile`` job of its own; never raises for the tool's sake."""
    from kernelwright.inspect.ncu import _missing_metrics, ncu_command, parse_raw_csv
    from kernelwright.isolation.process import run_child
    from kernelwright.jobs import PROFILE_RANGE, ProfileSpec, SanitizeRan

    exe = tool_path or find_profiler()
    if exe is None:
        return ExecutedEvidence(ran=False, note="Nsight Compute (ncu) is not on this machine (PATH, "
                                "/usr/local/cuda/bin): the instruction section is the SASS's (static)")
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="kernelwright-profile-"))
    metrics = list(METRICS)
    try:
        for _attempt in range(2):
            spec = ProfileSpec(problem=str(Path(problem).resolve()), candidate=str(Path(candidate).resolve()),
                               device=device, seed=seed, size_overrides=dict(size_overrides or {}))
            wrapper = ncu_command([], ncu=exe, metrics=metrics, launch_count=LAUNCH_LIMIT, nvtx_range=PROFILE_RANGE)
            tool_home = str(Path(os.path.realpath(exe)).parent)
            run = run_child("profile", spec, workdir=workdir, timeout_s=timeout_s, device=device, wrapper=wrapper,
                            keep=(spec.problem, spec.candidate, tool_home))
            out = _read(workdir / "profile-stdout.log")
            err = _read(workdir / "profile-stderr.log")
            missing = _missing_metrics(out + "\n" + err, metrics)
            if missing and len(missing) < len(metrics) and _attempt == 0:
                metrics = [m for m in metrics if m not in missing]  # this ncu or GPU lacks them: once more without
                continue
            break
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started
    if "ERR_NVGPUCTRPERM" in out + err:
        return ExecutedEvidence(ran=False, seconds=round(seconds, 2), note="ncu may not read the GPU's performance "
                                "counters here (ERR_NVGPUCTRPERM): run as root or load the driver with "
                                "NVreg_RestrictProfilingToAdminUsers=0; the instruction section is the SASS's")
    if run.timed_out or run.budget_cut:
        return ExecutedEvidence(ran=False, seconds=round(seconds, 2),
                                note=f"the profiled call did not finish under ncu within {timeout_s:.0f} s; the "
                                     "instruction section is the SASS's (static)")
    if run.report(SanitizeRan) is None:
        from kernelwright.isolation.protocol import JobError

        error = run.report(JobError)
        what = error.message if error else run.describe_exit()
        return ExecutedEvidence(ran=False, seconds=round(seconds, 2),
                                note=f"the forward did not finish under ncu ({what[:200]}); the instruction section "
                                     "is the SASS's (static)")
    try:
        launches = parse_raw_csv(out)
    except (csv.Error, ValueError) as exc:  # the evidence is missing, not the verdict
        return ExecutedEvidence(ran=False, seconds=round(seconds, 2), note=f"ncu's CSV could not be read ({exc}); "
                                "the instruction section is the SASS's (static)")
    if not launches:
        return ExecutedEvidence(ran=False, seconds=round(seconds, 2), note="ncu profiled no kernel in the call's "
                                "range (its output had no metrics); the instruction section is the SASS's (static)")
    return evidence(static, launches, seconds=seconds)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
