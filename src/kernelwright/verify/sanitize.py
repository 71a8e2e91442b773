"""compute-sanitizer on a candidate: memcheck, racecheck, initcheck and synccheck, each in the verifier's isolated
child (the candidate never runs in this process), at reduced sizes (the tools slow kernels 10-1000x).

A kernel can pass every numeric trial and still be wrong: a store a few bytes past its buffer lands in the caching
allocator's slack, a missing ``__syncthreads`` races only under another schedule, a read of uninitialised shared
memory happens to see zeros. The sanitizer sees them. The child (the ``sanitize`` job, verify/child/sanitize.py)
builds the problem's ``Model`` and the candidate's ``ModelNew`` with the same weights, runs one forward on seeded
inputs and synchronises, under

    compute-sanitizer --tool TOOL --error-exitcode 86 --print-limit 20 python -m kernelwright.isolation.child ...

with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` so that every tensor is its own allocation (the caching allocator would
hide an overrun inside a larger block). Its report is parsed into findings: ``out-of-bounds`` and
``misaligned-access`` (memcheck), ``shared-memory-race`` (racecheck), ``uninitialized-read`` (initcheck),
``barrier-misuse`` (synccheck) — each an integrity error, so a candidate with one is rejected — and
``sanitizer-error`` for anything else it reports. A machine without compute-sanitizer gets a one-line warning
(``sanitizer-missing``), not a crash; on the CPU there is nothing to sanitize (a note).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.isolation.protocol import JobError
from kernelwright.jobs import SanitizeRan, SanitizeSpec
from kernelwright.records import Severity

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ERROR_EXIT = 86  # --error-exitcode: the tool found something (a job's own failures exit otherwise)
PRINT_LIMIT = 20  # reports printed a tool run; the summary line still counts them all
MAX_ELEMENTS = 1 << 16  # the reduced sizes' budget: a memcheck'd forward of a GEMM at 64K elements takes seconds

_PREFIX = re.compile(r"^=+ ?")
# "at kernel_name(float*, int)+0x70 in /path/file.cu:12" / "at 0x70 in /path/file.py:40:kernel_name" (Triton)
_AT = re.compile(r"^\s*at (?P<where>.+?)(?: in (?P<file>\S+?):(?P<line>\d+)(?::\S+)?)?\s*$")
_INLINE_AT = re.compile(r" at (?P<where>[^\s][^+]*)\+0x[0-9a-fA-F]+ in (?P<file>\S+?):(?P<line>\d+)")
_SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY: (\d+) (?:error|hazard)")


@dataclass(frozen=True)
class SanitizerFinding:
    """One report of a tool: its kind (a finding code), the kernel and source line it names, its first line."""

    tool: str
    code: str
    severity: Severity
    message: str
    kernel: str = ""
    location: str = ""  # file:line where the tool gives one
    count: int = 1  # identical reports folded into one

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "code": self.code, "severity": self.severity.value, "message": self.message,
                "kernel": self.kernel,
                "location": self.location, "count": self.count}


# What starts a report, read from its first line: (finding code, severity, the tools it comes from (() any), words
# that start such a line). The tool's own reports first; then memcheck's kinds, which the others print too.
_RULES = (
    ("shared-memory-race", Severity.ERROR, ("racecheck",), ("race reported",)),
    ("uninitialized-read", Severity.ERROR, ("initcheck",), ("uninitialized",)),
    ("barrier-misuse", Severity.ERROR, ("synccheck",), ("barrier error", "barrier", "syncwarp", "divergent")),
    ("out-of-bounds", Severity.ERROR, (), ("invalid __", "out of bounds", "out-of-bounds")),
    ("misaligned-access", Severity.ERROR, (), ("misaligned",)),
    ("sanitizer-error", Severity.WARNING, (), ("program hit", "error:", "cuda_exception", "leak")),
)


def _kind(tool: str, headline: str) -> tuple[str, Severity] | None:
    """The finding code and severity of a report's first line, or None where the line starts no report."""
    h = headline.lower()
    for code, severity, tools, words in _RULES:
        if (not tools or tool in tools) and any(h.startswith(w) or f" {w}" in h for w in words):
            return code, severity
    return None


def parse(tool: str, text: str) -> list[SanitizerFinding]:
    """The reports in a compute-sanitizer log (its ``=========`` lines), identical ones folded; ``[]`` for a clean
    run. Each report is its first line (what happened) and the ``at ...`` line under it (kernel, file:line)."""
    reports: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for raw in text.splitlines():
        if not raw.startswith("="):
            continue
        line = _PREFIX.sub("", raw).rstrip()
        if not line or line.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "Saved host")):
            current = None
            continue
        indented = raw[len(raw) - len(raw.lstrip("=")):].startswith("     ")
        kind = None if indented else _kind(tool, line.strip())
        if kind is not None:
            current = {"code": kind[0], "severity": kind[1].value, "message": line.strip(), "kernel": "",
                       "location": ""}
            inline = _INLINE_AT.search(line)  # racecheck names the place on the report's own line
            if inline:
                current["kernel"] = _kernel_name(inline.group("where"))
                current["location"] = f"{Path(inline.group('file')).name}:{inline.group('line')}"
                current["message"] = line.strip()[: inline.start()].strip() or current["message"]
            reports.append(current)
            continue
        at = _AT.match(line)
        if current is not None and at and not current["kernel"]:
            where = at.group("where")
            current["kernel"] = _kernel_name(where)
            if at.group("file"):
                current["location"] = f"{Path(at.group('file')).name}:{at.group('line')}"
    folded: dict[tuple[str, str, str, str, str], int] = {}
    for r in reports:
        key = (r["code"], r["severity"], r["message"], r["kernel"], r["location"])
        folded[key] = folded.get(key, 0) + 1
    return [SanitizerFinding(tool=tool, code=c, severity=Severity(sev), message=m, kernel=k, location=loc, count=n)
            for (c, sev, m, k, loc), n in folded.items()]


def _kernel_name(where: str) -> str:
    """``void add<float>(float*, int)+0x70`` -> ``add<float>``; ``0x70`` (no symbol) -> ``""``."""
    words = where.split("+0x")[0].split("(")[0].split()
    return "" if not words or words[-1].startswith("0x") else words[-1]


def summary_count(text: str) -> int | None:
    """The tool's own count of errors (or hazards) from its summary line; None where it printed none."""
    found = _SUMMARY.findall(text)
    return int(found[-1]) if found else None


def find_tool() -> str | None:
    """compute-sanitizer where inspect/tools finds NVIDIA's other tools (wheels, CUDA_HOME, /usr/local/cuda, PATH)."""
    from kernelwright.inspect.tools import all_tools

    found = all_tools("compute-sanitizer")
    return str(found[0].path) if found else None


def parse_tools(text: str) -> tuple[str, ...]:
    """``--sanitize`` / ``--sanitize memcheck,racecheck``: the tools named (``all``: every one; ``none``: none)."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if names in ((), ("all",)):
        return TOOLS
    if names == ("none",):
        return ()
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ValueError(f"--sanitize {text!r}: {', '.join(unknown)} is no compute-sanitizer tool; choose from "
                         f"{', '.join(TOOLS)} or all")
    return names


def tools_argument(text: str) -> tuple[str, ...]:
    """``parse_tools`` for argparse (verify's and bench's ``--sanitize``)."""
    import argparse

    try:
        return parse_tools(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass
class ToolRun:
    tool: str
    findings: list[SanitizerFinding] = field(default_factory=list)
    ran: bool = False  # the candidate's forward finished under the tool
    exit: str = ""  # how the job ended where it did not finish
    seconds: float = 0.0
    reported: int | None = None  # the tool's own error count
    sizes: dict[str, int] = field(default_factory=dict)  # the reduced sizes it ran at


def run_tool(tool: str, problem: str | Path, candidate: str | Path, *, device: str, seed: int,
             size_overrides: dict[str, int] | None = None, timeout_s: float = 300.0,
             tool_path: str | None = None) -> ToolRun:
    """One tool over the candidate's forward, in a child of its own (``tool_path``: the sanitizer executable)."""
    from kernelwright.isolation.process import run_child

    exe = tool_path or find_tool()
    if exe is None:
        raise FileNotFoundError("compute-sanitizer")
    workdir = Path(tempfile.mkdtemp(prefix=f"kernelwright-sanitize-{tool}-"))
    started = time.monotonic()
    try:
        spec = SanitizeSpec(problem=str(Path(problem).resolve()), candidate=str(Path(candidate).resolve()),
                            device=device, seed=seed, size_overrides=dict(size_overrides or {}),
                            max_elements=MAX_ELEMENTS)
        run = run_child("sanitize", spec, workdir=workdir, timeout_s=timeout_s, device=device,
                        env_extra={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                        wrapper=(exe, "--tool", tool, "--error-exitcode", str(ERROR_EXIT),
                                 "--print-limit", str(PRINT_LIMIT)),
                        keep=(spec.problem, spec.candidate, exe))  # what the untrusted job's box shows it
        log = _read(workdir / "sanitize-stdout.log") + "\n" + _read(workdir / "sanitize-stderr.log")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = ToolRun(tool=tool, findings=parse(tool, log), seconds=time.monotonic() - started,
                     reported=summary_count(log))
    ran = run.report(SanitizeRan)
    result.ran = ran is not None
    result.sizes = dict(ran.sizes) if ran is not None else {}
    error = run.report(JobError)
    if error is not None:
        result.exit = error.message
    elif not result.ran or run.returncode not in (0, ERROR_EXIT):
        result.exit = run.describe_exit()
    return result


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def judge(judge: Any, problem: str | Path, candidate: str | Path, tools: tuple[str, ...], *, device: str,
          seed: int, size_overrides: dict[str, int] | None, timeout_s: float,
          tool_path: str | None = None) -> dict[str, float]:
    """Run each of ``tools`` over the candidate and add what they report to ``judge`` (the verifier's findings):
    an integrity error per kind of report, a note when every tool ran clean, a warning when the sanitizer is missing
    or a tool could not run the candidate. Returns each tool's seconds (the verdict's phases)."""
    if device != "cuda" and tool_path is None:
        judge.add("sanitizer-skipped", "compute-sanitizer needs a GPU: on the CPU the Triton interpreter runs the "
                  "kernels as NumPy, with nothing to sanitize", Severity.NOTE, tools=list(tools))
        return {}
    exe = tool_path or find_tool()
    if exe is None:
        judge.add("sanitizer-missing", "--sanitize: compute-sanitizer is not on this machine (PATH, CUDA_HOME/bin, "
                  "/usr/local/cuda/bin): nothing was sanitized; install the CUDA toolkit's compute-sanitizer",
                  Severity.WARNING, tools=list(tools))
        return {}
    seconds: dict[str, float] = {}
    clean: list[str] = []
    for tool in tools:
        result = run_tool(tool, problem, candidate, device=device, seed=seed, size_overrides=size_overrides,
                          timeout_s=timeout_s, tool_path=exe)
        seconds[f"sanitize_{tool}"] = round(result.seconds, 2)
        for f in result.findings:
            where = " at ".join(x for x in (f.kernel, f.location) if x)
            judge.add(f.code, f"{tool}: {f.message}" + (f" ({where})" if where else "")
                      + (f" [x{f.count}]" if f.count > 1 else ""), f.severity, tool=tool, kernel=f.kernel,
                      location=f.location, count=f.count)
        if result.findings:
            continue
        if result.reported:  # the tool counted errors its lines did not show in a form parsed here
            judge.add("sanitizer-error", f"{tool}: its summary counts {result.reported} error(s) that were not "
                      "listed in a known form (the job's stderr log has them)", Severity.WARNING, tool=tool)
        elif not result.ran:
            judge.add("sanitizer-skipped", f"{tool}: the candidate's forward did not finish under the tool: "
                      f"{result.exit[:200]}", Severity.WARNING, tool=tool)
        elif result.reported is None and result.exit:  # the forward ran, the tool died before its summary
            judge.add("sanitizer-skipped", f"{tool}: the tool ended without its summary ({result.exit[:200]}): "
                      "its report is incomplete, the job's stderr log has what it printed", Severity.WARNING,
                      tool=tool)
        else:
            clean.append(tool + (f" (sizes {result.sizes})" if result.sizes else ""))
    if clean and len(clean) == len(tools):
        judge.add("sanitizer-clean", f"compute-sanitizer {', '.join(clean)}: no report over the candidate's "
                  "forward", Severity.NOTE, tools=list(tools))
    return seconds
