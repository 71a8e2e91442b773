"""A :class:`~kernelwright.verify.records.Verdict` turned into the short, specific report a model can act on.

    text = feedback(Attempt(source=src, verdict=verdict, failure=None), max_lines=40)

The verifier's records are written for people and for the run database; a model needs far less of them, most
important first: integrity, errors (tracebacks cut to the candidate's own frames), wrong answers, instruction
findings, then performance. Earlier responses' reasoning never reaches a prompt: an :class:`Attempt` holds only
the extracted source, the verdict, and a one-line failure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelwright.llm.templates import _hint
from kernelwright.records import Severity, Status
from kernelwright.verify.codes import CATALOGUE, CODES

if TYPE_CHECKING:
    from kernelwright.verify.records import TrialOutcome, Verdict

# What the expectations engine (kernelwright.inspect.expectations) reports about instructions.
# What the SASS checks (inspect/expectations.py) say: the finding codes the catalogue marks as theirs.
INSTRUCTION_CODES = frozenset(c.code for c in CATALOGUE if c.instructions)
# Notes worth showing on a pass (other notes are bookkeeping).
_USEFUL_NOTES = frozenset({"library-share", "redundant-reference", "multiple-streams", "low-occupancy",
                           "local-memory", "wgmma-wait-injected", "setmaxnreg-ignored", "tf32-in-fp32"})
_ERROR_STATUSES = (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.CRASHED, Status.TIMEOUT, Status.UNSUPPORTED)
_LINE_CHARS = 240


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One candidate as the prompts see it: the extracted source (None when nothing could be extracted), its
    verdict (None when it was not verified), and a one-line failure (a parse or generation failure)."""

    source: str | None
    verdict: Verdict | None
    failure: str | None
    label: str = ""


# ----------------------------------------------------------------------------------------------------- formatting


def _clip(text: str, limit: int = _LINE_CHARS) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(value: Any) -> str:
    if value is None:
        return "NaN/inf"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _fit(sections: Sequence[Sequence[str]], max_lines: int) -> str:
    """Sections in priority order, each cut to what is left of ``max_lines``."""
    out: list[str] = []
    for section in sections:
        lines = [line for text in section for line in text.splitlines()]
        room = max_lines - len(out)
        if not lines:
            continue
        if room <= 0:
            break
        if len(lines) > room:
            lines = [*lines[: max(room - 1, 0)], f"… ({len(lines) - room + 1} more lines)"] if room > 1 else lines[:1]
        out += lines
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------------- errors

_FRAME = re.compile(r'^(?P<indent>\s*)File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>.+))?')
_FRAMEWORK_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|/kernelwright/|^<frozen |importlib")
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_TRACEBACK_NOISE = ("Traceback (most recent call last)", "The above exception was the direct cause",
                    "During handling of the above exception")
_WARNING = re.compile(r"\b\w*Warning\b|warn_once\(|warnings\.warn")
_COMMAND = re.compile(r"(\bnvcc\b|\bc\+\+|\bg\+\+|\bclang\+*|\bninja\b).*\s-[IDOoc]")
_NOISE_LINE = re.compile(r"^\[\d+/\d+\]|^ninja: |^FAILED: |^frame #\d+: |^Exception raised from ")  # and C++ frames
_ERRORISH = re.compile(r"error|exception|fault|abort|illegal|assert|killed|out of memory|^\s*\^", re.I)
_ABS_PATH = re.compile(r"(?<![\w.~])/(?:[^\s/\"'():,]+/)+(?P<name>[^\s/\"'():,]+)")


def _is_candidate_frame(path: str, candidate: str) -> bool:
    if candidate and (path == candidate or path.rsplit("/", 1)[-1] == candidate.rsplit("/", 1)[-1]):
        return True
    return not _FRAMEWORK_PATH.search(path) and not path.startswith("<")


def _shorten(line: str, candidate: str) -> str:
    if candidate:
        line = line.replace(candidate, "candidate.py")
    return _clip(_ABS_PATH.sub(lambda m: m.group("name"), line))


def _trim_traceback(text: str, candidate: str) -> list[str]:
    """A Python traceback (or compiler output) cut to what a model can act on: frames in the candidate's file with
    their source line, and the exception with its message; framework frames, carets of frames, warnings and
    build commands dropped."""
    out: list[str] = []
    # A traceback cut to its last lines may start inside a frame: skip indented lines until the first frame.
    in_frame, frame_indent, keep_frame, code_taken = bool(_FRAME.search(text)), 1, False, True
    skip_next = False
    for raw in text.splitlines():
        frame = _FRAME.match(raw)
        if frame:
            in_frame, frame_indent = True, len(frame.group("indent"))
            keep_frame = _is_candidate_frame(frame.group("path"), candidate)
            code_taken = not keep_frame
            if keep_frame:
                where = f'  File "candidate.py", line {frame.group("line")}'
                out.append(where + (f", in {frame.group('fn')}" if frame.group("fn") else ""))
            continue
        if in_frame and (not raw.strip() or raw.startswith(" " * (frame_indent + 1))):
            if not code_taken and raw.strip() and not _CARETS.match(raw):
                out.append("    " + _clip(raw.strip()))
                code_taken = True
            continue
        in_frame = False
        line = raw.rstrip()
        if skip_next:
            skip_next = False
            continue
        if not line.strip() or line.startswith(_TRACEBACK_NOISE) or _NOISE_LINE.match(line.strip()):
            continue
        if _WARNING.search(line) and not re.search(r"error", line, re.I):
            skip_next = True  # a warning's next line is the source line that raised it
            continue
        if len(line) > 200 and _COMMAND.search(line):
            continue
        out.append(_shorten(line, candidate))
    return out


def _condense(lines: list[str], limit: int) -> list[str]:
    """At most ``limit`` lines, keeping the candidate's frames, error lines (with the two after each) and the end."""
    if len(lines) <= limit:
        return lines
    keep: set[int] = {0, *range(max(len(lines) - 4, 0), len(lines))}
    for i, line in enumerate(lines):
        if line.startswith('  File "candidate.py"'):
            keep.update((i, i + 1))
        elif _ERRORISH.search(line):
            keep.update((i, i + 1, i + 2))
    out: list[str] = []
    previous = -1
    for i in sorted(k for k in keep if k < len(lines)):
        if i != previous + 1 and out:
            out.append("  …")
        out.append(lines[i])
        previous = i
    return out[-limit:]


def _error_excerpt(verdict: Verdict, limit: int = 18) -> list[str]:
    candidate = verdict.candidate or ""
    lines: list[str] = []
    for f in verdict.findings:
        detail = f.details.get("details") if f.severity is Severity.ERROR else None
        if isinstance(detail, str) and detail.strip():
            lines += _trim_traceback(detail, candidate)
    if verdict.stderr_tail:
        stderr = _trim_traceback(verdict.stderr_tail, candidate)
        if lines:
            stderr = [s for s in stderr if _ERRORISH.search(s) and s not in lines][:6]
        lines += stderr
    deduped: list[str] = []
    for line in lines:
        if not deduped or deduped[-1] != line:
            deduped.append(line)
    return _condense(deduped, limit)


# ----------------------------------------------------------------------------------------------------- mismatches


def _comparison_line(trial: TrialOutcome, output: int, c: Mapping[str, Any]) -> str:
    head = f"- trial {trial.index} ({trial.kind}" + (f", seed {trial.seed}" if trial.seed is not None else "")
    head += f"), output {output}: "
    numel, wrong = c.get("numel"), c.get("wrong_count")
    parts = []
    if numel:
        parts.append(f"{wrong} of {numel} elements wrong ({100 * (c.get('wrong_fraction') or 0):.3g}%)")
    if c.get("nonfinite_mismatches"):
        parts.append(f"{c['nonfinite_mismatches']} NaN/inf where the reference is finite (or the reverse)")
    if c.get("max_abs_error") is not None:
        parts.append(f"max abs error {_num(c.get('max_abs_error'))}, max rel error {_num(c.get('max_rel_error'))}")
    if c.get("worst_index") is not None:
        parts.append(f"worst at {list(c['worst_index'])}: got {_num(c.get('worst_got'))}, "
                     f"expected {_num(c.get('worst_expected'))}")
    if c.get("mode") == "reference" and c.get("bound") is not None:
        own = c.get("native_max_error")
        parts.append(f"allowed error {_num(c['bound'])}" + (f" (PyTorch's own {_num(own)})" if own is not None else ""))
    elif c.get("mode") == "kernelbench":
        parts.append(f"tolerance atol=rtol={_num(c.get('bound'))}")
    rms, mean = c.get("rel_error_rms") or 0.0, c.get("rel_error_mean") or 0.0
    if rms and abs(mean) > 0.9 * rms:
        parts.append(f"errors all lean one way (mean relative error {mean:+.3g})")
    return head + "; ".join(parts)


def _mismatch_hint(comparisons: Iterable[Mapping[str, Any]]) -> str:
    cs = list(comparisons)
    if any(c.get("nonfinite_mismatches") for c in cs):
        return _hint("mismatch", "nonfinite")
    if cs and all((c.get("wrong_fraction") or 0) < 0.05 for c in cs):
        return _hint("mismatch", "few")
    if any((c.get("rel_error_rms") or 0) and abs(c.get("rel_error_mean") or 0) > 0.9 * c["rel_error_rms"]
           for c in cs):
        return _hint("mismatch", "systematic")
    return _hint("mismatch", "all")


def _trials_section(verdict: Verdict, max_shown: int = 3) -> list[str]:
    wrong = [t for t in verdict.trials if t.status == "wrong"]
    if not wrong:
        return []
    ordered = [t for t in wrong if t.kind == "random"] + [t for t in wrong if t.kind != "random"]
    lines = ["Wrong answers:"]
    failing: list[Mapping[str, Any]] = []
    for trial in ordered[:max_shown]:
        bad = [(j, c) for j, c in enumerate(trial.comparisons) if not c.get("ok", True)]
        if not bad:
            lines.append(f"- trial {trial.index} ({trial.kind}): {_clip(trial.note or 'wrong')}")
        for j, c in bad[:2]:
            lines.append(_clip(_comparison_line(trial, j, c), 400))
            failing.append(c)
    kinds_wrong = _count_kinds(wrong)
    kinds_ok = _count_kinds([t for t in verdict.trials if t.status == "ok"])
    lines.append(f"Trials wrong: {kinds_wrong}; right: {kinds_ok or 'none'}.")
    specials = sorted({t.kind for t in wrong if t.kind != "random"})
    if not any(t.kind == "random" for t in wrong):
        for kind in specials:
            if _hint("trials", kind):
                lines.append(f"The {kind} trial: {_hint('trials', kind)}.")
    hint = _mismatch_hint(failing)
    if hint:
        lines.append(f"Hint: {hint}.")
    return lines


def _count_kinds(trials: Iterable[TrialOutcome]) -> str:
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.kind] = counts.get(t.kind, 0) + 1
    return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.items())


# ----------------------------------------------------------------------------------------------------- findings


def _integrity_codes() -> frozenset[str]:
    return frozenset(c.code for c in CATALOGUE if c.rejects)


def _evidence(details: Mapping[str, Any], limit: int = 8) -> str:
    """Numeric evidence from a finding's details (opcode counts, bytes, occupancy), compactly."""
    items: list[str] = []

    def add(name: str, value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            items.append(f"{name}={_num(value) if isinstance(value, float) else value}")

    for key in _EVIDENCE_KEYS:
        value = details.get(key)
        if not isinstance(value, Mapping):
            add(key, value)
            continue
        for k, v in value.items():
            if key.endswith("_bits"):
                add(f"{k}-bit {'loads' if 'load' in key else 'stores'}", v)
            elif isinstance(v, Mapping):  # per kernel: {kernel: {opcode: count}}
                for k2, v2 in v.items():
                    add(str(k2), v2)
            else:
                add(str(k), v)
    return ", ".join(items[:limit])


_EVIDENCE_KEYS = ("classes", "mma_opcodes", "fma_opcodes", "global_opcodes", "local_opcodes", "global_load_bits",
                  "global_store_bits", "spill_store_bytes", "spill_load_bytes", "registers", "shared_bytes",
                  "threads_per_block", "occupancy", "median_ms", "physical_floor_ms", "unexplained_ms_per_call")


def _finding_line(code: str, message: str, details: Mapping[str, Any], *, with_hint: bool) -> str:
    line = f"- `{code}`: {_clip(message, 300)}"
    evidence = _evidence(details)
    if evidence:
        line += f" [{evidence}]"
    # The prompt's own hint, else the catalogue's one-line meaning (which says what to do).
    hint = (_hint("findings", code) or (CODES[code].meaning if code in CODES else "")) if with_hint else ""
    if hint:
        line += f" → {hint}"
    return line


def _findings_section(verdict: Verdict, title: str, codes: frozenset[str] | None, *,
                      severities: Sequence[Severity], with_hint: bool, skip: frozenset[str] = frozenset()) -> list[str]:
    chosen = [f for f in verdict.findings if (codes is None or f.code in codes) and f.severity in severities
              and f.code not in skip]
    if not chosen:
        return []
    return [title] + [_finding_line(f.code, f.message, f.details, with_hint=with_hint) for f in chosen]


# ----------------------------------------------------------------------------------------------------- passes


def _performance_section(verdict: Verdict) -> list[str]:
    lines: list[str] = []
    cand = verdict.median_ms()
    if cand:
        parts = [f"candidate {cand:.4f} ms"]
        for key, label in (("eager", "eager"), ("eager_defaults", "eager at PyTorch's defaults (TF32 cuDNN)"),
                           ("compile", "torch.compile"), ("compile_max_autotune", "torch.compile max-autotune")):
            m = verdict.median_ms(key)
            if m:
                parts.append(f"{label} {m:.4f} ms ({m / cand:.2f}x)")
        lines.append("Timing (median): " + "; ".join(parts) + " — a speedup above 1x means faster than that.")
    elif str(verdict.device.get("type", "")) == "cpu":
        lines.append("Timing: not measured (no GPU here; correctness was checked under the Triton interpreter).")
    roof = verdict.roofline
    if roof:
        text = f"Roofline: {_si(roof.bytes, 'B')} moved at least, {_si(roof.flops, 'FLOP')}"
        floor = roof.achievable_floor_ms or roof.physical_floor_ms
        if floor:
            which = "measured ceilings" if roof.achievable_floor_ms else "datasheet peaks"
            text += f"; floor {floor:.4f} ms ({roof.bound}-bound, {which})"
        if verdict.percent_of_floor is not None:
            text += f"; the candidate reaches {verdict.percent_of_floor:.0f}% of the floor (100% = at the floor)"
        lines.append(text + ".")
    lines += _kernels_lines(verdict)
    lines += _instruction_lines(verdict)
    return lines


def _kernels_lines(verdict: Verdict) -> list[str]:
    if not verdict.kernels:
        return []
    from kernelwright.verify.report import kernel_groups

    own, library = kernel_groups(verdict)
    return [f"Kernels: own {own}; library {library}."]


def _instruction_lines(verdict: Verdict, limit: int = 4) -> list[str]:
    lines = []
    for s in verdict.instructions[:limit]:
        name, arch = str(s.name or s.launched_as or "?")[:48], s.arch or "?"
        parts = [f"{s.registers} registers"]
        if s.spill_store_bytes:
            parts.append(f"{s.spill_store_bytes} B spilled")
        if s.shared_bytes:
            parts.append(f"{s.shared_bytes} B shared memory")
        occ = s.occupancy or {}
        if occ.get("warps_per_sm") is not None:
            parts.append(f"{occ['warps_per_sm']}/{occ.get('max_warps_per_sm', '?')} warps per SM")
        classes = s.histogram_by_class
        tensor = [f"{c} {classes[c]}" for c in ("tcgen05", "wgmma", "mma") if classes.get(c)]
        mma_types = s.mma_types
        types = f" ({', '.join(mma_types)} operands)" if mma_types else ""
        parts.append(f"tensor cores: {', '.join(tensor)}{types}" if tensor else "no tensor-core instructions")
        movers = [f"{c} {classes[c]}" for c in ("tma", "cp_async", "ldmatrix", "setmaxnreg") if classes.get(c)]
        if movers:
            parts.append(", ".join(movers))
        loads = s.global_load_bits
        if loads:
            widths = sorted(loads.items(), key=lambda kv: -int(kv[0]))
            parts.append("global loads " + ", ".join(f"{b}-bit x{n}" for b, n in widths))
        lines.append(f"Instructions {name} ({arch}): " + "; ".join(parts) + ".")
    return lines


# ----------------------------------------------------------------------------------------------------- feedback


def feedback(attempt: Attempt, *, max_lines: int = 40) -> str:
    """What the model needs to fix or improve, from an attempt's failure or verdict: at most ``max_lines`` lines,
    most important first (integrity, errors, wrong answers, instruction findings, performance)."""
    if attempt.failure and attempt.verdict is None:
        return _fit([[f"No usable file: {attempt.failure}"]], max_lines)
    verdict = attempt.verdict
    if verdict is None:
        return "Not verified."
    status = verdict.status
    head = f"Verdict: {status}" + ("" if verdict.clean or status is not Status.PASSED else " (not clean)")
    head += f" — {_clip(verdict.message, 300)}"
    if status in _ERROR_STATUSES and _hint("status", str(status)):
        hint = _hint("status", str(status))
        head += f"\n({hint[0].upper()}{hint[1:]}.)"
    integrity = _integrity_codes()
    sections: list[list[str]] = [[head]]
    if attempt.failure:
        sections.append([f"Also: {attempt.failure}"])
    sections.append(_findings_section(
        verdict, "Integrity — rejected, whatever the speed:", integrity, severities=(Severity.ERROR,),
        with_hint=True))
    if status in _ERROR_STATUSES:
        excerpt = _error_excerpt(verdict)
        sections.append(["Error output (framework frames removed):", *excerpt] if excerpt else [])
    sections.append(_findings_section(
        verdict, "Other errors:", None, severities=(Severity.ERROR,), with_hint=False,
        skip=integrity | INSTRUCTION_CODES | {"mismatch"} | _child_error_codes(verdict)))
    sections.append(_trials_section(verdict))
    sections.append(_findings_section(
        verdict, "Instruction findings:", INSTRUCTION_CODES - integrity,
        severities=(Severity.ERROR, Severity.WARNING), with_hint=True))
    if status is Status.PASSED:
        sections.append(_performance_section(verdict))
        sections.append(_findings_section(
            verdict, "Warnings:", None, severities=(Severity.WARNING,), with_hint=True, skip=INSTRUCTION_CODES))
        sections.append(_findings_section(
            verdict, "Notes:", _USEFUL_NOTES, severities=(Severity.NOTE,), with_hint=True))
    return _fit(sections, max_lines)


def _child_error_codes(verdict: Verdict) -> frozenset[str]:
    """Codes of the findings that carry a traceback (shown in the error excerpt instead)."""
    return frozenset(f.code for f in verdict.findings if isinstance(f.details.get("details"), str))
