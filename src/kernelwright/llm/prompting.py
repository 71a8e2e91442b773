"""What goes into the LLM's prompt: the rules, the problem, the target's facts, the verifier's feedback.

    messages = build_messages(problem_source=src, problem_name="softmax.py", arch="sm_90a", gpu=lookup("H200"),
                              policy=Policy(), stage=choose_stage(best), best=best, last=last)

The prose lives in ``prompts/*.md`` (rendered with :class:`string.Template`, ``$name`` placeholders); this module
picks the pieces and turns a :class:`~kernelwright.verify.records.Verdict` into the short, specific report a model
can act on (:func:`feedback`). Earlier responses' reasoning never reaches a prompt: an :class:`Attempt` holds only
the extracted source, the verdict, and a one-line failure.
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from kernelwright.records import Severity, Status

if TYPE_CHECKING:
    from kernelwright.generate.families.base import Policy
    from kernelwright.hardware.spec import ArchSpec, GpuSpec
    from kernelwright.verify.records import TrialOutcome, Verdict

STAGES = ("correctness", "memory", "instructions")
LANGUAGES = ("triton", "cuda")
TENSOR_DOMINANT = ("matmul", "conv", "attention")
MEMORY_TARGET_PERCENT = 85.0  # a memory-bound kernel below this share of the achievable floor works on its accesses

# What the expectations engine (kernelwright.inspect.expectations) reports about instructions.
INSTRUCTION_CODES = frozenset({
    "tf32-in-fp32", "fp16-in-fp32", "low-precision-mma", "mma-type-unknown", "no-tensor-core",
    "legacy-mma-on-hopper", "legacy-mma-on-blackwell", "spills", "local-memory", "scalar-global-access",
    "low-occupancy", "cannot-launch", "wgmma-serialized", "wgmma-wait-injected", "setmaxnreg-ignored",
})  # fmt: skip
# Instruction findings that call for a different instruction path (the "instructions" stage).
_PATH_CODES = frozenset({"no-tensor-core", "legacy-mma-on-hopper", "legacy-mma-on-blackwell", "wgmma-serialized",
                         "spills", "local-memory", "scalar-global-access", "low-occupancy"})
# Notes worth showing on a pass (other notes are bookkeeping).
_USEFUL_NOTES = frozenset({"library-share", "redundant-reference", "multiple-streams", "low-occupancy",
                           "local-memory", "wgmma-wait-injected", "setmaxnreg-ignored", "tf32-in-fp32"})
_ERROR_STATUSES = (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.CRASHED, Status.TIMEOUT, Status.UNSUPPORTED)
_LINE_CHARS = 240


class PromptTemplateError(LookupError):
    """A prompt template is missing, or a placeholder in it was given no value (a defect, not a user error)."""


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One candidate as the prompts see it: the extracted source (None when nothing could be extracted), its
    verdict (None when it was not verified), and a one-line failure (a parse or generation failure)."""

    source: str | None
    verdict: Verdict | None
    failure: str | None
    label: str = ""


# ----------------------------------------------------------------------------------------------------- templates


def _read(name: str) -> str:
    try:
        return resources.files("kernelwright.llm").joinpath("prompts").joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptTemplateError(f"prompt template {name!r} is missing from kernelwright/llm/prompts") from None


@functools.cache
def load_template(name: str) -> string.Template:
    """``prompts/<name>`` as a :class:`string.Template`."""
    return string.Template(_read(name))


def render(name: str, **values: Any) -> str:
    """``prompts/<name>`` with every ``$placeholder`` filled; a placeholder without a value is an error."""
    template = load_template(name)
    try:
        text = template.substitute(values)
    except KeyError as exc:
        raise PromptTemplateError(f"prompt template {name!r} needs a value for ${exc.args[0]}") from None
    except ValueError as exc:
        raise PromptTemplateError(f"prompt template {name!r} has a malformed placeholder: {exc}") from None
    return text.strip("\n")


def placeholders(name: str) -> set[str]:
    """The placeholder names ``prompts/<name>`` uses."""
    pattern = load_template(name).pattern
    found = set()
    for match in pattern.finditer(load_template(name).template):
        key = match.group("named") or match.group("braced")
        if key:
            found.add(key)
    return found


@functools.cache
def _sections(name: str) -> dict[str, str]:
    """``## heading`` sections of ``prompts/<name>``."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in _read(name).splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip("\n") for k, v in sections.items()}


@functools.cache
def _hints(section: str) -> dict[str, str]:
    """The ``- `key`: text`` items of one section of ``prompts/hints.md``, in file order."""
    items: dict[str, str] = {}
    key = None
    for line in _sections("hints.md").get(section, "").splitlines():
        match = re.match(r"^- `([^`]+)`: (.*)$", line)
        if match:
            key = match.group(1)
            items[key] = match.group(2).strip()
        elif key and line.startswith("  ") and line.strip():
            items[key] += " " + line.strip()
    return items


def _hint(section: str, key: str) -> str:
    return _hints(section).get(key, "")


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


def _bytes(n: float) -> str:
    for factor, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= factor:
            return f"{n / factor:.4g} {unit}"
    return f"{n:.0f} B"


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
    from kernelwright.verify.findings import INTEGRITY_CODES

    return INTEGRITY_CODES


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
    hint = _hint("findings", code) if with_hint else ""
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
    timing = verdict.timing or {}
    cand = timing.get("candidate")
    if cand:
        parts = [f"candidate {cand['median_ms']:.4f} ms"]
        for key, label in (("eager", "eager"), ("compile", "torch.compile"),
                           ("compile_max_autotune", "torch.compile max-autotune")):
            m = timing.get(key)
            if m:
                parts.append(f"{label} {m['median_ms']:.4f} ms ({m['median_ms'] / cand['median_ms']:.2f}x)")
        lines.append("Timing (median): " + "; ".join(parts) + " — a speedup above 1x means faster than that.")
    elif str(verdict.device.get("type", "")) == "cpu":
        lines.append("Timing: not measured (no GPU here; correctness was checked under the Triton interpreter).")
    roof = verdict.roofline or {}
    if roof:
        text = f"Roofline: {_si(float(roof.get('bytes') or 0), 'B')} moved at least, {_si(float(roof.get('flops') or 0), 'FLOP')}"
        floor = roof.get("achievable_floor_ms") or roof.get("physical_floor_ms")
        if floor:
            which = "measured ceilings" if roof.get("achievable_floor_ms") else "datasheet peaks"
            text += f"; floor {floor:.4f} ms ({roof.get('bound')}-bound, {which})"
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
        name, arch = str(s.get("name") or s.get("launched_as") or "?")[:48], s.get("arch", "?")
        parts = [f"{s.get('registers', '?')} registers"]
        if s.get("spill_store_bytes"):
            parts.append(f"{s['spill_store_bytes']} B spilled")
        if s.get("shared_bytes"):
            parts.append(f"{s['shared_bytes']} B shared memory")
        occ = s.get("occupancy") or {}
        if occ.get("warps_per_sm") is not None:
            parts.append(f"{occ['warps_per_sm']}/{occ.get('max_warps_per_sm', '?')} warps per SM")
        classes = s.get("histogram_by_class") or {}
        tensor = [f"{c} {classes[c]}" for c in ("tcgen05", "wgmma", "mma") if classes.get(c)]
        mma_types = s.get("mma_types") or {}
        types = f" ({', '.join(mma_types)} operands)" if mma_types else ""
        parts.append(f"tensor cores: {', '.join(tensor)}{types}" if tensor else "no tensor-core instructions")
        movers = [f"{c} {classes[c]}" for c in ("tma", "cp_async", "ldmatrix", "setmaxnreg") if classes.get(c)]
        if movers:
            parts.append(", ".join(movers))
        loads = s.get("global_load_bits") or {}
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


# ----------------------------------------------------------------------------------------------------- stages


def choose_stage(best: Attempt | None) -> str:
    """``"correctness"`` until a kernel passes; then, for a memory-bound problem below about 85 % of its roofline
    floor (or not timed), ``"memory"``; for a matmul/conv/attention-dominant problem, or a memory-bound one at the
    floor whose SASS still shows problems, ``"instructions"``."""
    verdict = best.verdict if best else None
    if verdict is None or not verdict.passed:
        return "correctness"
    traits = verdict.traits
    if traits is not None and traits.dominant in TENSOR_DOMINANT:
        return "instructions"
    if traits is None and (verdict.roofline or {}).get("bound") == "compute":
        return "instructions"
    percent = verdict.percent_of_floor
    if percent is None or percent < MEMORY_TARGET_PERCENT:
        return "memory"
    if any(f.code in _PATH_CODES and f.severity is not Severity.NOTE for f in verdict.findings):
        return "instructions"
    return "memory"


def _progress(verdict: Verdict | None) -> str:
    if verdict is None:
        return ""
    cand = (verdict.timing or {}).get("candidate")
    floor = (verdict.roofline or {}).get("achievable_floor_ms")
    if cand and verdict.percent_of_floor is not None and floor:
        return (f", at {verdict.percent_of_floor:.0f}% of its achievable roofline floor ({cand['median_ms']:.4f} ms "
                f"against {floor:.4f} ms)")
    if cand:
        speed = verdict.speedups.get("vs_compile_max_autotune") or verdict.speedups.get("vs_compile")
        return f" and runs in {cand['median_ms']:.4f} ms" + (f" ({speed:.2f}x torch.compile)" if speed else "")
    return " (its speed was not measured: no GPU here)"


def _focus(verdict: Verdict | None, codes: frozenset[str]) -> str:
    """One line naming the findings to fix first (the report above explains each)."""
    if verdict is None:
        return ""
    chosen = list(dict.fromkeys(f.code for f in verdict.findings
                                if f.code in codes and f.severity is not Severity.NOTE))
    if not chosen:
        return ""
    return "- Fix first what the verifier found in the best kernel: " + ", ".join(f"`{c}`" for c in chosen) + "."


def _tensor_core_path(arch: str) -> str:
    spec = _arch(arch)
    features = spec.features if spec else frozenset()
    for key in ("tcgen05", "wgmma", "mma.sync"):
        if key in features:
            return _hint("tensor-core-path", key)
    return "the fastest matrix instructions the arch has"


def stage_instruction(stage: str, *, arch: str, gpu: GpuSpec | None = None, best: Attempt | None = None,
                      last: Attempt | None = None) -> str:
    """The "what to do now" paragraph for ``stage``."""
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r} is not one of {', '.join(STAGES)}")
    verdict = best.verdict if best else None
    if stage == "correctness":
        if best is None and last is None:
            situation = "No verified kernel exists yet."
        elif last is not None and (last.verdict is None or not last.verdict.passed):
            situation = "The last attempt failed; the verifier's report above says why."
        else:
            situation = "No kernel has passed yet."
        return render("stage_correctness.md", situation=situation)
    traits = verdict.traits if verdict else None
    if stage == "memory":
        sms = gpu.sm_count if gpu else "the"
        nbytes = _bytes(traits.bytes) if traits and traits.bytes else "its inputs and outputs"
        return render("stage_memory.md", progress=_progress(verdict), bytes=nbytes, sms=sms,
                      focus=_focus(verdict, INSTRUCTION_CODES | {"library-share"}))
    if traits is not None and traits.dominant not in TENSOR_DOMINANT:
        return render("stage_instructions_memory.md", progress=_progress(verdict),
                      focus=_focus(verdict, INSTRUCTION_CODES))
    return render("stage_instructions_tensor.md", progress=_progress(verdict),
                  dominant=traits.dominant if traits else "matmul", dtype=(traits.compute_dtype if traits else None)
                  or "its", arch=arch, tensor_core_path=_tensor_core_path(arch),
                  focus=_focus(verdict, INSTRUCTION_CODES))


# ----------------------------------------------------------------------------------------------------- hardware


def _arch(arch: str) -> ArchSpec | None:
    from kernelwright.errors import InputError
    from kernelwright.hardware.spec import arch_spec

    try:
        return arch_spec(arch)
    except InputError:
        return None


def _resolve_gpu(gpu: GpuSpec | str | None) -> GpuSpec | None:
    if gpu is None or not isinstance(gpu, str):
        return gpu
    from kernelwright.hardware.spec import lookup

    return lookup(gpu)


_OPERAND_TYPES = (("mma.sync", "fp16"), ("bf16", "bf16"), ("tf32", "tf32"), ("fp8", "fp8 (e4m3/e5m2)"),
                  ("fp6", "fp6"), ("fp4", "fp4"), ("int8-mma", "int8"), ("fp64-mma", "fp64"))
_PEAK_LABELS = (("fp64", "fp64"), ("fp64_tensor", "fp64 tensor"), ("fp32", "fp32 (SIMT)"), ("tf32", "tf32"),
                ("fp16", "fp16"), ("bf16", "bf16"), ("fp8", "fp8"), ("int8", "int8 (TOP/s)"), ("fp4", "fp4"))


def hardware_facts(arch: str, gpu: GpuSpec | str | None = None, ceilings: Mapping[str, Any] | Any = None) -> str:
    """The target's facts as a short list: SMs, limits, memory, peaks, instruction features of ``arch``, and the
    measured ceilings (``{"copy_gbs": ..., "matmul_tflops": {...}}`` or a calibration ``Ceilings``) when given."""
    gpu = _resolve_gpu(gpu)
    spec = _arch(arch)
    title = f"{gpu.name}, {arch}" if gpu else arch
    if spec:
        cc = ".".join(map(str, spec.compute_capability)) if spec.compute_capability else "?"
        title += f" ({spec.family}, compute capability {cc})"
    lines = [f"- GPU: {title}"]
    if gpu:
        lines.append(f"- {gpu.sm_count} SMs; boost clock {gpu.boost_clock_mhz:.0f} MHz")
    if spec:
        lines.append(f"- threads: warp {spec.warp_size}; up to {spec.max_threads_per_block} per block, "
                     f"{spec.max_threads_per_sm} ({spec.max_warps_per_sm} warps) and {spec.max_blocks_per_sm} blocks "
                     "per SM")
        lines.append(f"- registers: {spec.registers_per_sm // 1024}K 32-bit per SM, at most "
                     f"{spec.max_registers_per_thread} per thread")
        lines.append(f"- shared memory: {spec.shared_memory_per_block_bytes // 1024} KiB per block by default, up to "
                     f"{spec.shared_memory_per_block_optin_bytes // 1024} KiB per block with the opt-in attribute, "
                     f"{spec.shared_memory_per_sm_bytes // 1024} KiB per SM")
    if gpu:
        memory = f"{gpu.memory_bytes / 1e9:.0f} GB at " if gpu.memory_bytes else ""
        lines.append(f"- L2 cache {gpu.l2_bytes / (1 << 20):.0f} MiB; memory {memory}{gpu.memory_bandwidth_gbs:.0f} GB/s "
                     "(datasheet)")
        peaks = [f"{label} {gpu.peak_tflops[key]:g}" for key, label in _PEAK_LABELS if gpu.peak_tflops.get(key)]
        if peaks:
            lines.append("- dense peak TFLOP/s: " + ", ".join(peaks))
    measured = _ceilings_line(ceilings)
    if measured:
        lines.append(measured)
    if spec:
        types = [label for key, label in _OPERAND_TYPES if key in spec.features]
        if types and ("mma.sync" in spec.features or "mfma" in spec.features):
            lines.append("- tensor-core operand types: " + ", ".join(types))
        features = [f"{key}: {text}" for key, text in _hints("features").items() if key in spec.features]
        if features:
            lines.append(f"- instruction features of {arch}:")
            lines += [f"  - {f}" for f in features]
    return "\n".join(lines)


def _ceilings_line(ceilings: Any) -> str:
    if ceilings is None:
        return ""
    data = ceilings.to_json() if hasattr(ceilings, "to_json") else dict(ceilings)
    parts = []
    if data.get("copy_gbs"):
        parts.append(f"copy {float(data['copy_gbs']):.0f} GB/s (read + write)")
    rates = data.get("matmul_tflops") or {}
    if rates:
        parts.append("library matmul " + ", ".join(f"{k} {float(v):.0f}" for k, v in rates.items()) + " TFLOP/s")
    return "- measured on this device: " + "; ".join(parts) if parts else ""


# ----------------------------------------------------------------------------------------------------- messages


def _precision_text(policy: Policy) -> str:
    key = {(False, False): "strict", (True, False): "tf32", (False, True): "reduced",
           (True, True): "tf32+reduced"}[(bool(policy.allow_tf32), bool(policy.allow_reduced_precision))]
    return _sections("precision.md")[key]


def _gencode(arch: str) -> str:
    digits = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{digits},code=sm_{digits}"


def system_message(*, arch: str, gpu: GpuSpec | str | None = None, policy: Policy, language: str = "triton") -> str:
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    gpu = _resolve_gpu(gpu)
    target = f"an NVIDIA {gpu.name} ({arch})" if gpu else f"NVIDIA {arch}"
    rules = render(f"language_{language}.md", arch=arch, gencode=_gencode(arch))
    return render("system.md", target=target, language_rules=rules, precision_policy=_precision_text(policy))


def _attempt_block(attempt: Attempt, heading: str, max_lines: int) -> str:
    label = f" ({attempt.label})" if attempt.label else ""
    if attempt.source:
        code = f"```python\n{attempt.source.rstrip()}\n```"
    else:
        code = "No file could be taken from that response."
    return render("attempt.md", heading=heading + label, code=code, feedback=feedback(attempt, max_lines=max_lines))


def _same(a: Attempt, b: Attempt) -> bool:
    return a is b or (a.source is not None and a.source == b.source)


def _user_message(template: str, *, problem_source: str, problem_name: str, arch: str, gpu: GpuSpec | None,
                  ceilings: Any, stage: str, attempts: str, instruction: str) -> str:
    return render(template, problem_name=problem_name, problem_source=problem_source.rstrip(),
                  hardware_facts=hardware_facts(arch, gpu, ceilings), attempts=f"{attempts}\n\n" if attempts else "",
                  stage=stage, stage_instruction=instruction, output_format=render("output_format.md"))


def build_messages(*, problem_source: str, problem_name: str, arch: str, gpu: GpuSpec | str | None = None,
                   ceilings: Mapping[str, Any] | Any = None, policy: Policy, stage: str, best: Attempt | None = None,
                   last: Attempt | None = None, language: str = "triton",
                   feedback_lines: int = 40) -> list[dict[str, str]]:
    """``[system, user]`` messages asking for a ``ModelNew`` file: the rules, the problem, the target, the best
    kernel so far and the last attempt (when it differs) with the verifier's reports, and the stage's goal."""
    gpu = _resolve_gpu(gpu)
    blocks = []
    if best is not None:
        blocks.append(_attempt_block(best, "Best verified kernel so far", feedback_lines))
    if last is not None and (best is None or not _same(last, best)):
        blocks.append(_attempt_block(last, "Your last attempt", feedback_lines))
    instruction = stage_instruction(stage, arch=arch, gpu=gpu, best=best, last=last)
    user = _user_message("optimize.md", problem_source=problem_source, problem_name=problem_name, arch=arch,
                         gpu=gpu, ceilings=ceilings, stage=stage, attempts="\n\n".join(blocks), instruction=instruction)
    return [{"role": "system", "content": system_message(arch=arch, gpu=gpu, policy=policy, language=language)},
            {"role": "user", "content": user}]


def build_mutation_messages(parent: Attempt, *, problem_source: str, problem_name: str, arch: str,
                            gpu: GpuSpec | str | None = None, ceilings: Mapping[str, Any] | Any = None,
                            policy: Policy, stage: str, language: str = "triton",
                            feedback_lines: int = 40) -> list[dict[str, str]]:
    """Messages asking for one substantive change to a verified ``parent`` towards ``stage``'s goal."""
    gpu = _resolve_gpu(gpu)
    block = _attempt_block(parent, "The parent kernel", feedback_lines)
    instruction = stage_instruction(stage, arch=arch, gpu=gpu, best=parent)
    user = _user_message("mutation.md", problem_source=problem_source, problem_name=problem_name, arch=arch,
                         gpu=gpu, ceilings=ceilings, stage=stage, attempts=block, instruction=instruction)
    return [{"role": "system", "content": system_message(arch=arch, gpu=gpu, policy=policy, language=language)},
            {"role": "user", "content": user}]


def build_crossover_messages(a: Attempt, b: Attempt, *, problem_source: str, problem_name: str, arch: str,
                             gpu: GpuSpec | str | None = None, ceilings: Mapping[str, Any] | Any = None,
                             policy: Policy, stage: str, language: str = "triton",
                             feedback_lines: int = 30) -> list[dict[str, str]]:
    """Messages asking for one kernel that combines two verified parents ``a`` and ``b``."""
    gpu = _resolve_gpu(gpu)
    blocks = [_attempt_block(a, "Parent A", feedback_lines), _attempt_block(b, "Parent B", feedback_lines)]
    better = a if _faster(a, b) else b
    instruction = stage_instruction(stage, arch=arch, gpu=gpu, best=better)
    user = _user_message("crossover.md", problem_source=problem_source, problem_name=problem_name, arch=arch,
                         gpu=gpu, ceilings=ceilings, stage=stage, attempts="\n\n".join(blocks), instruction=instruction)
    return [{"role": "system", "content": system_message(arch=arch, gpu=gpu, policy=policy, language=language)},
            {"role": "user", "content": user}]


def _median_ms(attempt: Attempt) -> float:
    cand = (attempt.verdict.timing or {}).get("candidate") if attempt.verdict else None
    return float(cand["median_ms"]) if cand else math.inf


def _faster(a: Attempt, b: Attempt) -> bool:
    return _median_ms(a) <= _median_ms(b)


def build_problem_messages(request: str) -> list[dict[str, str]]:
    """Messages asking for a KernelBench reference problem file for a plain-language ``request``."""
    return [{"role": "system", "content": render("problem_system.md")},
            {"role": "user", "content": render("problem_request.md", request=request.strip())}]
