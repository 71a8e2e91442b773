"""Which problems a bench covers, and which solution file answers each (``--solutions``).

A problem file is a ``.py`` file that defines ``class Model`` and ``get_inputs`` (KernelBench's format; the file is
read, not run, here). A solution answers the problem of the same file name; failing that, a file whose name is the
problem's stem followed by ``_`` and anything (``19_ReLU_solution.py`` for ``19_ReLU.py``), when exactly one does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelwright.errors import InputError

_MODEL = re.compile(r"^class\s+Model\b", re.M)
_INPUTS = re.compile(r"^def\s+get_inputs\s*\(", re.M)


@dataclass(frozen=True)
class BenchProblem:
    name: str  # the file's stem: the row's name, and its folder under the bench's output
    path: Path
    solution: Path | None = None


def is_problem_file(path: Path) -> bool:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return bool(_MODEL.search(text) and _INPUTS.search(text))


def _natural(path: Path) -> tuple:
    """KernelBench names start with a number: 2_... before 10_..."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


def collect_problems(paths: Sequence[str | Path]) -> list[BenchProblem]:
    """The problem files named or found (not recursively) in the folders named, in natural order. InputError (one
    line) for a path that does not exist, a file that is no problem, or a folder without any problem."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError(f"{path} does not exist: give problem files or folders of them")
        if path.is_dir():
            files = sorted((p for p in path.glob("*.py") if is_problem_file(p)), key=_natural)
            if not files:
                raise InputError(f"{path} holds no problem files (a problem file defines class Model and "
                                 "get_inputs, as KernelBench's do)")
            found += files
        elif not is_problem_file(path):
            raise InputError(f"{path} is not a problem file: it must define class Model and get_inputs")
        else:
            found.append(path)
    problems: list[BenchProblem] = []
    names: dict[str, Path] = {}
    for path in found:
        resolved = path.resolve()
        if path.stem in names:
            if names[path.stem] == resolved:
                continue
            raise InputError(f"two problems are called {path.stem} ({names[path.stem]} and {resolved}); bench "
                             "them in separate runs or rename one")
        names[path.stem] = resolved
        problems.append(BenchProblem(name=path.stem, path=resolved))
    return problems


def match_solutions(problems: Sequence[BenchProblem], folder: str | Path) -> list[BenchProblem]:
    """Each problem with its solution file (None where the folder has none). InputError when the folder does not
    exist or nothing in it matches any problem."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"--solutions {folder} is not a folder of ModelNew files")
    files = {p.name: p for p in folder.glob("*.py")}
    matched: list[BenchProblem] = []
    for problem in problems:
        solution = files.get(problem.path.name)
        if solution is None:
            prefixed = [p for n, p in files.items() if n.startswith(problem.name + "_")]
            solution = prefixed[0] if len(prefixed) == 1 else None
        matched.append(BenchProblem(problem.name, problem.path, solution.resolve() if solution else None))
    if not any(p.solution for p in matched):
        raise InputError(f"no file in {folder} matches a problem by name (a solution for 19_ReLU.py is "
                         "19_ReLU.py or 19_ReLU_<anything>.py); check the folder or the problems given")
    return matched
