"""The trust boundary in the tree (issue 41): what runs beside untrusted code is kernelwright/verify/child/, and none
of it reaches the parent's judging. Held three ways — by what a job process actually loads, by every import the
package's source writes (function-local ones included), and by where each untrusted job's function lives."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import kernelwright
import kernelwright.jobs  # noqa: F401 - registers every job
from kernelwright.isolation import protocol

SRC = Path(kernelwright.__file__).resolve().parent
CHILD = SRC / "verify" / "child"
CHILD_PACKAGE = "kernelwright.verify.child"

# The parent's side: what judges the reports, runs the jobs, and the tools built on the verdict. A module beside the
# candidate that imported one would run it where the candidate can patch it, or would be judging there.
PARENT_SIDE = (
    "kernelwright.verify.verifier", "kernelwright.verify.boundary", "kernelwright.verify.sequence",
    "kernelwright.verify.judging", "kernelwright.verify.findings", "kernelwright.verify.report",
    "kernelwright.verify.decoys", "kernelwright.verify.sanitize", "kernelwright.verify.instructions",
    "kernelwright.verify.executed", "kernelwright.verify.tool_steps", "kernelwright.verify.cli", "kernelwright.isolation.process", "kernelwright.bench", "kernelwright.search",
    "kernelwright.llm",
)
WHY = ("verify/child/ runs beside the candidate and must not import the parent's judging (see "
       "kernelwright/verify/child/__init__.py): move what it needs to a shared module, or the judging to the parent")


def _parent_side(module: str) -> str | None:
    """The PARENT_SIDE entry ``module`` is or lies under, or None."""
    return next((p for p in PARENT_SIDE if module == p or module.startswith(p + ".")), None)


# Run in a fresh interpreter: what a job process beside the candidate holds once the job registry, the child's
# runner and every untrusted job's function are imported (as ``python -m kernelwright.jobs JOB ...`` does), and
# every module of verify/child besides (their lazy imports are the syntax check's).
_PROBE = """
import importlib, json, pkgutil, sys
import kernelwright.jobs
from kernelwright.isolation import child, protocol
for job, spec in sorted(protocol.jobs().items()):
    if spec.untrusted:
        child._resolve(job)
import kernelwright.verify.child as package
for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
    importlib.import_module(info.name)
print(json.dumps(sorted(m for m in sys.modules if m == "kernelwright" or m.startswith("kernelwright."))))
"""


def test_a_job_process_beside_the_candidate_loads_nothing_of_the_parents_side() -> None:
    path = [str(SRC.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}  # this checkout's kernelwright, not an installed one
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert f"{CHILD_PACKAGE}.candidate" in loaded and f"{CHILD_PACKAGE}.sanitize" in loaded  # the probe probed
    crossed = {m: _parent_side(m) for m in loaded if _parent_side(m)}
    assert not crossed, f"{WHY}; loaded in the job process: {sorted(crossed)}"


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module name) of every import in ``tree`` — at any depth, relative ones resolved against ``module``;
    ``from a.b import c`` gives both ``a.b`` and ``a.b.c`` (c may be a submodule)."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def _crossings(source: str, module: str, is_package: bool = False) -> list[str]:
    return [f"line {line}: {name} ({_parent_side(name)})"
            for line, name in _imports(ast.parse(source), module, is_package) if _parent_side(name)]


def test_no_module_beside_the_candidate_imports_the_parents_side() -> None:
    files = sorted(CHILD.rglob("*.py"))
    assert {"candidate.py", "integrity.py", "launches.py", "poison.py", "sanitize.py", "timing.py"} <= {
        f.name for f in files}
    crossings = {}
    for path in files:
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found = _crossings(path.read_text(), module, is_package=rel.name == "__init__")
        if found:
            crossings[str(path.relative_to(SRC))] = found
    assert not crossings, f"{WHY}: {crossings}"


def test_the_syntax_check_sees_every_form_of_import() -> None:
    """The check above is only as good as the imports it sees: lazy, aliased, from-package and relative ones."""
    module = f"{CHILD_PACKAGE}.candidate"
    assert _crossings("def f():\n    from kernelwright.verify import judging\n", module) == [
        "line 2: kernelwright.verify.judging (kernelwright.verify.judging)"]
    assert _crossings("import kernelwright.isolation.process as p\n", module)
    assert _crossings("from kernelwright.bench.runner import run\n", module)
    assert _crossings("from ..findings import Judge\n", module) == [
        "line 1: kernelwright.verify.findings (kernelwright.verify.findings)",
        "line 1: kernelwright.verify.findings.Judge (kernelwright.verify.findings)"]
    assert _crossings("from .. import verifier\n", module)
    assert not _crossings("from kernelwright.verify import tensors, trials\nfrom . import launches\n", module)
    assert not _crossings("import kernelwright.verify.judging_helpers\n", module)  # a prefix is not the module


def test_every_untrusted_job_runs_a_function_of_verify_child() -> None:
    untrusted = {job: spec for job, spec in protocol.jobs().items() if spec.untrusted}
    assert {"candidate", "sanitize", "profile"} <= set(untrusted)
    for job, spec in untrusted.items():
        module_name, _, function = spec.runs.partition(":")
        assert module_name.startswith(CHILD_PACKAGE + "."), (
            f"job {job!r} runs untrusted code but its function {spec.runs!r} lives outside {CHILD_PACKAGE}: "
            "what runs beside a candidate belongs in kernelwright/verify/child/")
        module = __import__(module_name, fromlist=[function])
        assert callable(getattr(module, function, None)), f"job {job!r}: {spec.runs!r} names no function"
