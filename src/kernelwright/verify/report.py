"""The human-readable verdict: a short table (``--json`` prints the whole record instead)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kernelwright.inspect.analysis import KernelSummary
from kernelwright.jobs import KernelRecord
from kernelwright.records import Status
from kernelwright.verify.records import Verdict

_TIMING_ROWS = (("candidate", "candidate"), ("eager", "eager"),
                ("eager_defaults", "eager, TF32 cuDNN"), ("compile", "torch.compile"),
                ("compile_max_autotune", "compile max-autotune"))


def _fmt_ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _device_line(device: dict[str, Any]) -> str:
    parts = [str(device.get("name") or device.get("type", "?"))]
    if device.get("compute_capability"):
        parts.append(f"cc {device['compute_capability']}, {device.get('sm_count')} SMs")
    if device.get("type") == "cpu":
        parts.append("Triton interpreter" if device.get("interpreter") else "CPU")
    versions = [f"{k} {device[k]}" for k in ("torch", "triton") if device.get(k)]
    return " · ".join(parts + versions)


def _trials_line(verdict: Verdict) -> str:
    kinds = Counter(t.kind for t in verdict.trials if t.status in ("ok", "wrong"))
    status = Counter(t.status for t in verdict.trials)
    described = ", ".join(f"{n} {k}" if n > 1 else k for k, n in kinds.items())
    line = f"{sum(kinds.values())} run" + (f" ({described})" if described else "")
    if status.get("wrong"):
        line += f"; {status['wrong']} wrong"
    elif kinds:
        line += "; all correct"
    skipped = [t for t in verdict.trials if t.status == "skipped"]
    if skipped:
        line += "; skipped: " + ", ".join(f"{t.kind} ({t.note})" for t in skipped)
    not_run = [t for t in verdict.trials if t.status == "not-run"]
    if not_run:
        line += f"; {len(not_run)} not run"
    return line


def _error_line(verdict: Verdict) -> str | None:
    worst = None
    for t in verdict.trials:
        for c in t.comparisons:
            if c.get("max_rel_error") is None:
                continue
            if worst is None or (c.get("max_abs_error") or 0) > (worst.get("max_abs_error") or 0):
                worst = c
    if worst is None:
        return None
    line = f"max abs {worst['max_abs_error']:.3g}, max rel {worst['max_rel_error']:.3g}, rel L2 {worst['rel_l2_error']:.3g}"
    if worst.get("mode") == "reference" and worst.get("native_max_error") is not None:
        line += f" (bound {worst['bound']:.2g}; PyTorch's own error {worst['native_max_error']:.2g})"
    elif worst.get("mode") == "kernelbench":
        line += f" (KernelBench atol=rtol={worst['bound']:g})"
    return line


def render(verdict: Verdict) -> str:
    rows: list[tuple[str, str]] = []
    status = str(verdict.status)
    if verdict.passed and not verdict.clean:
        status += " (not clean: see the warnings below)"
    rows.append(("verdict", f"{status} — {verdict.message}"))
    rows.append(("problem", verdict.problem))
    rows.append(("candidate", verdict.candidate))
    rows.append(("device", _device_line(dict(verdict.device))))
    rows.append(("seed", f"{verdict.seed} (replay with --seed {verdict.seed})"))
    if verdict.size_overrides:
        rows.append(("sizes", "checked at reduced sizes: " + ", ".join(
            f"{k}={v}" for k, v in verdict.size_overrides.items())))
    rows.append(("trials", _trials_line(verdict)))
    error = _error_line(verdict)
    if error:
        rows.append(("accuracy", error))
    lines = [f"{k:<12} {v}" for k, v in rows]

    if verdict.timing:
        lines.append(f"{'timing':<12} {'':<22}{'median ms':>10} {'min ms':>9} {'IQR ms':>8} {'reps':>6} {'speedup':>8}")
        cand = verdict.median_ms()
        for key, label in _TIMING_ROWS:
            m = verdict.timing.get(key)
            if m is None and key not in verdict.timing:
                continue
            if m is None:
                lines.append(f"{'':<12} {label:<22}{'failed':>10}")
                continue
            speedup = "" if key == "candidate" or not cand else f"{m.median_ms / cand:.3g}x"
            lines.append(f"{'':<12} {label:<22}{_fmt_ms(m.median_ms):>10} {_fmt_ms(m.min_ms):>9} "
                         f"{m.iqr_ms:>8.4f} {m.reps:>6} {speedup:>8}")
    elif verdict.device.get("type") == "cpu":
        how = ("its CUDA C++ was compiled for inspection, not run" if verdict.status is Status.UNSUPPORTED
               else "correctness was checked under the Triton interpreter")
        lines.append(f"{'timing':<12} not measured (no GPU: {how})")

    if verdict.roofline:
        r = verdict.roofline
        floor = r.achievable_floor_ms or r.physical_floor_ms
        which = "measured ceilings" if r.achievable_floor_ms else "datasheet peaks"
        text = f"{_si(r.bytes, 'B')}, {_si(r.flops, 'FLOP')}"
        if floor:
            text += f"; floor {floor:.4f} ms ({r.bound}-bound, {which})"
        if verdict.percent_of_floor is not None:
            text += f"; candidate at {verdict.percent_of_floor:.0f}% of floor"
        lines.append(f"{'roofline':<12} {text}")

    if verdict.kernels:
        own, lib = kernel_groups(verdict)
        lines.append(f"{'kernels':<12} own: {own}")
        lines.append(f"{'':<12} library: {lib}")

    for summary in verdict.instructions[:6]:
        lines.append(f"{'instructions':<12} {_instruction_line(summary)}")
    if verdict.executed is not None and verdict.executed.ran:
        lines += [f"{'executed':<12} {line}" for line in executed_lines(verdict.executed)]

    for f in verdict.findings:
        lines.append(f"{str(f.severity):<12} {f.code}: {f.message}")
    if verdict.stderr_tail and not verdict.passed:
        tail = verdict.stderr_tail.strip().splitlines()[-6:]
        lines.append(f"{'stderr':<12} " + f"\n{'':<13}".join(tail))
    if verdict.phases:
        lines.append(f"{'took':<12} {verdict.duration_s:.1f} s: " + ", ".join(
            f"{name} {seconds:.1f} s" for name, seconds in verdict.phases.items()))
    return "\n".join(lines)


def executed_lines(found: Any) -> list[str]:
    """The executed section (verify/executed.py) in a few lines: each class present in the own kernels' SASS
    against what ran, and each own kernel's share of the profiled call's device time."""
    classes = found.classes()
    text = "; ".join(f"{name} {int(c['present'])} in SASS / {c['executed']:.0f} executed"
                     for name, c in classes.items()) or "no instruction of the reported classes"
    share = found.own_share
    lines = [text + (f"; own kernels {100 * share:.0f}% of the call's device time" if share is not None else "")]
    for row in [k for k in found.kernels if k.own][:4]:
        types = ", ".join(f"{k} {v:.0f}" for k, v in sorted(row.mma_types.items()))
        lines.append(f"{row.name[:48]} x{row.launches}" + (f", MMA {types}" if types else "")
                     + (f", {100 * row.share:.0f}% of device time" if row.share is not None else ""))
    return lines


def _instruction_line(summary: KernelSummary) -> str:
    name = summary.name or summary.launched_as or "?"
    arch = summary.arch or "?"
    parts = [f"{str(name)[:40]} ({arch})", f"{summary.registers} regs"]
    if summary.spilled is not None:  # known only from a ptxas log or Triton's count
        parts.append(f"{(summary.spill_store_bytes or 0) + (summary.spill_load_bytes or 0)} spill B")
    parts.append(f"{summary.shared_bytes} smem B")
    classes = summary.histogram_by_class
    if classes:
        top = sorted(classes.items(), key=lambda kv: -kv[1])[:5]
        parts.append(", ".join(f"{k} {v}" for k, v in top))
    distinctive = summary.distinctive
    if distinctive:
        used = [k for k, v in distinctive.items() if v]
        parts.append(f"uses {', '.join(used) if used else 'none'} of {len(distinctive)} distinctive {arch} classes")
    return "; ".join(parts)


def kernel_groups(verdict: Verdict) -> tuple[str, str]:
    """The kernels a candidate launched, as two short lists (its own; the libraries'): name, launches, share of
    device time; at most four each."""
    total = sum(k.device_time_us or 0 for k in verdict.kernels)

    def show(group: list[KernelRecord]) -> str:
        if not group:
            return "none"
        items = []
        for k in group[:4]:
            share = f", {100 * (k.device_time_us or 0) / total:.0f}% of device time" if total else ""
            items.append(f"{k.name[:48]} x{k.launches}{share}")
        return "; ".join(items) + (f"; +{len(group) - 4} more" if len(group) > 4 else "")

    return (show([k for k in verdict.kernels if k.origin == "own"]),
            show([k for k in verdict.kernels if k.origin != "own"]))
