"""The catalogue of finding codes (kernelwright/verify/codes.py) against the code that raises them and the docs.

src/ is read as syntax trees, so a code raised anywhere — ``judge.add("x", ...)``, ``Finding(code="x")``,
``channel.send("note", code="x")``, ``JobFailure(status, "x", ...)``, a ``("x", Severity.W, ...)`` rule — must have
its entry, and an entry must be raised somewhere. A code computed at run time is accepted only at the places
listed in PASS_THROUGH, each of which forwards codes that are raised literally elsewhere.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.records import Severity, Status
from kernelwright.verify import codes
from kernelwright.verify.codes import CATALOGUE, CODES

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "kernelwright"
INTEGRITY_DOC = ROOT / "docs" / "integrity.md"
TABLE_HEADING = "## Every finding code"
FIX = "add an entry for it to CATALOGUE in src/kernelwright/verify/codes.py (then regenerate docs/integrity.md's table)"

# Where a code is not a literal: (file under kernelwright/, the code's expression) -> where its codes come from.
PASS_THROUGH = {
    ("verify/findings.py", "code"): "Judge.add itself",
    ("verify/verifier.py", "code"): "SPECIAL_TRIAL_CODES, or the `code = ...` of a structural problem",
    ("verify/judging.py", "code"): "SPECIAL_TRIAL_CODES (a special trial's failure)",
    ("verify/verifier.py", "finding.code"): "the candidate job's findings sent over its channel",
    ("verify/groups.py", "finding.code"): "a later trial group's candidate job's findings sent over its channel",
    ("verify/verifier.py", "note.code"): "the jobs' notes sent over their channels",
    ("verify/verifier.py", "error.code"): "the jobs' errors sent over their channels, from JobFailure",
    ("verify/instructions.py", "f.code"): "the expectations engine's Finding(code=...)",
    ("verify/child/integrity.py", "code"): "IntegrityMonitor._once('code', ...)",
    ("verify/child/candidate.py", "code"): "classify_exception's ('status', 'code') returns",
    ("isolation/child.py", "failure.code"): "JobFailure(status, 'code', ...)",
    ("inspect/expectations.py", "kind"): "its ('code', Severity.X, ...) ptxas rules",
    ("verify/sanitize.py", "f.code"): "compute-sanitizer's report kinds, its ('code', Severity.X, ...) _RULES",
}
# Callables whose code= keyword is a finding code, and the severity they give it (send's is its first argument's).
RAISERS = {"Finding": Severity.ERROR, "_report": Severity.ERROR, "ChildFinding": Severity.ERROR,
           "JobError": Severity.ERROR, "Note": Severity.NOTE, "send": None}
_SENT = {"note": Severity.NOTE, "finding": Severity.ERROR, "error": Severity.ERROR}
POSITIONAL = {"_once": 0, "JobFailure": 1}  # callables taking the code positionally, and where
_STATUSES = {s.value for s in Status}


@dataclass(frozen=True)
class Site:
    where: str  # file:line
    code: str | None  # None: computed (``expr``)
    expr: str = ""
    severities: tuple[Severity, ...] = ()  # what the site gives it, where it says


def _severities(node: ast.AST | None, default: Severity | None) -> tuple[Severity, ...]:
    """The severities a site gives its code (none where that is not known here)."""
    if node is None:
        return (default,) if default else ()
    return tuple(Severity[n.attr] for n in ast.walk(node)
                 if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "Severity")


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _codelike(node: ast.AST) -> bool:
    return bool(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", _literal(node) or ""))


def _choices(node: ast.AST) -> list[str]:
    """``"a"`` or ``"a" if ... else "b"``: the codes; anything else: none."""
    if isinstance(node, ast.IfExp):
        body, orelse = _choices(node.body), _choices(node.orelse)
        return body + orelse if body and orelse else []
    return [_literal(node) or ""] if _codelike(node) else []


def _call_sites(node: ast.Call, where: str) -> list[Site]:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    code_node, severity_node, default = None, keywords.get("severity"), Severity.ERROR
    if name == "add" and ast.unparse(func).endswith("judge.add") and node.args:
        code_node = node.args[0]
        severity_node = node.args[2] if len(node.args) > 2 else severity_node
    elif name in POSITIONAL and len(node.args) > POSITIONAL[name]:
        code_node = node.args[POSITIONAL[name]]
    elif "code" in keywords and (name in RAISERS or _codelike(keywords["code"])):
        code_node = keywords["code"]
        default = _SENT.get(_literal(node.args[0]) or "") if name == "send" and node.args else RAISERS.get(name)
    if code_node is None:
        return []
    severities = _severities(severity_node, default)
    literal = _literal(code_node)
    expr = "" if literal else ast.unparse(code_node).replace("['code']", ".code")  # a message as a dict or a record
    return [Site(where, literal, expr, severities)]


def _sites(path: Path) -> list[Site]:
    rel = path.relative_to(SRC).as_posix()
    try:
        return _sites_in(path.read_text(), rel)
    except SyntaxError as exc:  # the scan would miss the file's codes
        return [Site(f"{rel}:{exc.lineno}", None, f"<does not parse: {exc.msg}>")]


def _sites_in(source: str, rel: str) -> list[Site]:
    found: list[Site] = []
    for node in ast.walk(ast.parse(source, rel)):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            found += _call_sites(node, where)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets):
            # code = "syntax-error" if ... else "missing-modelnew"
            found += [Site(where, code, severities=(Severity.ERROR,)) for code in _choices(node.value)]
        elif isinstance(node, ast.Tuple) and len(node.elts) >= 2 and _literal(node.elts[0]):
            first, second = node.elts[0], node.elts[1]
            if isinstance(second, ast.Attribute) and ast.unparse(second).startswith("Severity."):
                found.append(Site(where, _literal(first), severities=_severities(second, None)))  # a rule table
            elif _literal(first) in _STATUSES and _literal(second):
                found.append(Site(where, _literal(second), severities=(Severity.ERROR,)))  # ("status", "code")
    return found


def _referenced(path: Path) -> list[tuple[str, str]]:
    """Codes that code tests for: ``judge.has("x")``, ``f.code == "x"``, ``code in ("x", "y")``."""
    rel, out = path.relative_to(SRC).as_posix(), []
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError:
        return []  # reported by _sites
    for node in ast.walk(tree):
        operands: list[ast.AST] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "has":
            operands = list(node.args)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            sides = [node.left, node.comparators[0]]
            if any(ast.unparse(s) == "code" or ast.unparse(s).endswith(".code") for s in sides):
                operands = sides
        for operand in operands:
            out += [(f"{rel}:{node.lineno}", n.value) for n in ast.walk(operand) if _literal(n)]
    return out


SITES = [s for path in sorted(SRC.rglob("*.py")) for s in _sites(path)]
RAISED = {s.code for s in SITES if s.code}


def test_the_scan_sees_every_way_a_code_is_raised() -> None:
    source = """
judge.add("a-1", "m")
self.judge.add("a-2", "m", Severity.NOTE)
Finding(code="a-3", message="m", severity=Severity.NOTE if allowed else Severity.ERROR)
channel.send("note", code="a-4", message="m")
channel.send("error", status="runtime_error", code=failure.code, message="m")
channel.send(Note(code="a-12", message="m"))
channel.send(JobError(status="runtime_error", code=error["code"], message="m"))
raise JobFailure("compile_error", "a-5", "m")
self._once("a-6", key, "m")
code = "a-7" if broken else "a-8"
rules = (("a-9", Severity.WARNING, "m"),)
def classify(exc):
    return "runtime_error", "a-10"
other(code="a-11")
render(code=text)
seen.add("not-a-code")
"""
    found = {(s.code, s.expr, s.severities) for s in _sites_in(source, "x.py")}
    error, note, warning = Severity.ERROR, Severity.NOTE, Severity.WARNING
    assert found == {("a-1", "", (error,)), ("a-2", "", (note,)), ("a-3", "", (note, error)), ("a-4", "", (note,)),
                     (None, "failure.code", (error,)), ("a-5", "", (error,)), ("a-6", "", (error,)),
                     ("a-7", "", (error,)), ("a-8", "", (error,)), ("a-9", "", (warning,)), ("a-10", "", (error,)),
                     ("a-11", "", ()), ("a-12", "", (note,)), (None, "error.code", (error,))}


def test_every_code_raised_in_src_is_catalogued() -> None:
    missing = [f"{s.where}: {s.code!r} is raised here but has no catalogue entry"
               + (f" (a typo of {codes.closest(s.code, 1)[0]!r}?)" if codes.closest(s.code, 1) else "")
               for s in SITES if s.code and s.code not in CODES]
    assert not missing, "\n".join(missing) + f"\nfix: {FIX}"


def test_every_catalogued_code_is_raised_and_no_dead_entry_is() -> None:
    from kernelwright.verify.findings import SPECIAL_TRIAL_CODES

    raised = RAISED | {code for code, _ in SPECIAL_TRIAL_CODES.values()}
    dead = [c.code for c in CATALOGUE if c.raised and c.code not in raised]
    assert not dead, f"catalogue entries raised nowhere in src/: {dead}; remove them from verify/codes.py"
    revived = [c.code for c in CATALOGUE if not c.raised and c.code in raised]
    assert not revived, f"{revived} are raised now: drop raised=False from their entries"
    assert [c.code for c in CATALOGUE if not c.raised] == ["half-in-fp32"]


def test_instruction_codes_are_the_expectations_engines() -> None:
    engine = {s.code for s in SITES if s.code and s.where.startswith("inspect/expectations.py:")}
    flagged = {c.code for c in CATALOGUE if c.instructions}
    assert engine == flagged, (f"raised by inspect/expectations.py but not instructions=True: {engine - flagged}; "
                               f"flagged but not raised there: {flagged - engine}")


def test_the_expectations_docstring_lists_the_instruction_codes() -> None:
    from kernelwright.inspect import expectations

    listed = dict(re.findall(r"^``([a-z0-9-]+)``\s+(error|warning|note)\b", expectations.__doc__ or "", re.M))
    assert set(listed) == {c.code for c in CATALOGUE if c.instructions}, "inspect/expectations.py's table of codes"
    wrong = {code: severity for code, severity in listed.items() if Severity(severity) is not CODES[code].severity}
    assert not wrong, f"inspect/expectations.py's table gives other severities than the catalogue: {wrong}"


def test_computed_codes_only_where_they_pass_codes_through() -> None:
    unknown = [f"{s.where}: " + (s.expr if s.expr.startswith("<") else f"the finding code is computed as `{s.expr}`")
               for s in SITES
               if s.code is None and (s.where.split(":")[0], s.expr) not in PASS_THROUGH]
    assert not unknown, "\n".join(unknown) + (
        "\nfix: raise a literal code, or add (file, expression) to PASS_THROUGH in tests/verify/test_codes.py "
        "naming where its codes are raised literally (so this scan sees them)")


def test_severities_raised_are_the_catalogued_ones() -> None:
    wrong = [f"{s.where}: {s.code!r} raised as {sorted(map(str, set(s.severities) - set(CODES[s.code].severities)))}"
             f", the catalogue gives {[str(v) for v in CODES[s.code].severities]}"
             for s in SITES if s.code in CODES and not set(s.severities) <= set(CODES[s.code].severities)]
    assert not wrong, "\n".join(wrong) + "\nfix: the entry's severity/also in verify/codes.py, or the raise"


def test_codes_tested_for_in_src_are_catalogued() -> None:
    unknown = [f"{where}: tests for {code!r}, which no catalogue entry names" for path in sorted(SRC.rglob("*.py"))
               for where, code in _referenced(path) if re.fullmatch(r"[a-z0-9-]+", code) and code not in CODES]
    assert not unknown, "\n".join(unknown) + f"\nfix: a typo, or {FIX}"


def test_derived_sets_keep_their_values() -> None:
    from kernelwright.verify.findings import (
        HEADLINE_ORDER,
        INTEGRITY_CODES,
        SPECIAL_TRIAL_CODES,
        UNCLEAN_CODES,
    )

    assert frozenset({
        "stale-memory", "side-stream", "background-thread", "background-process", "output-subclass",
        "timer-tampering", "no-own-kernel", "output-caching", "input-mutation", "precision", "tf32-in-fp32",
        "fp16-in-fp32", "half-in-fp32", "distribution-shortcut", "shape-specialised", "nondeterministic",
        "persisting-l2", "reference-access", "timed-call-mismatch", "beyond-roofline", "output-aliases-input",
        "protocol-violation", "out-of-bounds", "misaligned-access", "shared-memory-race", "uninitialized-read",
        "barrier-misuse", "evidence-missing", "harness-hook",
    }) == INTEGRITY_CODES  # fmt: skip
    assert frozenset({"degenerate-problem"}) == UNCLEAN_CODES
    assert HEADLINE_ORDER == (
        "timer-tampering", "reference-access", "background-thread", "background-process", "side-stream",
        "persisting-l2", "output-subclass", "timed-call-mismatch", "beyond-roofline", "output-caching",
        "input-mutation", "output-aliases-input", "no-own-kernel", "precision", "tf32-in-fp32", "fp16-in-fp32",
        "half-in-fp32", "nondeterministic", "distribution-shortcut", "shape-specialised", "stale-memory",
        "output-structure", "mismatch",
    )  # fmt: skip
    assert {code for code, _ in SPECIAL_TRIAL_CODES.values()} <= INTEGRITY_CODES


def test_catalogue_is_well_formed() -> None:
    assert len(CODES) == len(CATALOGUE), "a code is defined twice"
    ranks = sorted(c.headline for c in CATALOGUE if c.headline)
    assert ranks == list(range(1, len(ranks) + 1)), "headline ranks must be 1..n, each once"
    for c in CATALOGUE:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", c.code), c.code
        assert c.kind in codes.KINDS, c
        assert c.severity not in c.also, c
        assert c.meaning and "|" not in c.meaning and "\n" not in c.meaning and len(c.meaning) <= 200, c.code
        assert not c.rejects or c.severity is Severity.ERROR, c.code  # an integrity finding decides the verdict
        assert not c.unclean or c.severity is Severity.WARNING, c.code  # a pass carries no error


# ------------------------------------------------------------------------------------------------------- docs


def _section(path: Path, heading: str) -> str:
    """The text under ``heading`` up to the next heading of its level."""
    text = path.read_text()
    assert heading in text, f"{path.name} has no {heading!r}"
    return re.split(r"^#{2} ", text.split(heading + "\n", 1)[1], maxsplit=1, flags=re.M)[0]


def _doc_table() -> str:
    return "\n".join(line for line in _section(INTEGRITY_DOC, TABLE_HEADING).splitlines() if line.startswith("|"))


def test_docs_table_is_the_catalogue() -> None:
    assert _doc_table() == codes.markdown_table(), (
        f"docs/integrity.md's table under {TABLE_HEADING!r} differs from the catalogue; replace it with the "
        "output of: .venv/bin/python -c 'from kernelwright.verify.codes import markdown_table; "
        "print(markdown_table())'")


def test_docs_say_how_each_integrity_code_is_caught() -> None:
    prose = INTEGRITY_DOC.read_text().replace(_doc_table(), "")
    undocumented = [c.code for c in CATALOGUE if c.rejects and f"`{c.code}`" not in prose]
    assert not undocumented, f"docs/integrity.md does not say how {undocumented} are caught (outside the table)"


def test_other_lists_of_codes_name_catalogued_codes() -> None:
    from kernelwright.llm import feedback, prompting, templates

    lists = {
        "llm/feedback.py INSTRUCTION_CODES": feedback.INSTRUCTION_CODES,
        "llm/feedback.py _USEFUL_NOTES": feedback._USEFUL_NOTES,
        "llm/prompting.py _PATH_CODES": prompting._PATH_CODES,
        "llm/prompts/hints.md findings": set(templates._hints("findings")),
        "docs/inspect.md findings": set(re.findall(r"^\| `([a-z0-9-]+)` \|", _section(ROOT / "docs" / "inspect.md",
                                                                                     "## Findings"), re.M)),
    }
    unknown = {name: sorted(set(found) - set(CODES)) for name, found in lists.items() if set(found) - set(CODES)}
    assert not unknown, f"codes no catalogue entry names: {unknown}"
    assert all(lists.values()), "a list read here is empty: the test no longer reads it"


# -------------------------------------------------------------------------------------------------------- cli


def test_explain_prints_a_code_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--explain", "stale-memory"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("stale-memory: integrity") and CODES["stale-memory"].meaning in out


def test_explain_an_unknown_code_names_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--explain", "stale-memroy"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'stale-memroy'" in err and "closest: stale-memory" in err
