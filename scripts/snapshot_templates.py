"""Write every candidate file the template families produce for a set of problems, to compare two versions of them.

    python scripts/snapshot_templates.py OUT_DIR [PROBLEM.py | DIR ...]   # default: problems/*.py

For each problem, each arch (sm_90a, sm_80) and each precision policy (the default, and TF32 allowed), it captures
and plans the problem as ``kernelwright optimize`` does (``template_builder`` in search/candidates.py: capture, plan,
one space per group, ``emit``), then writes ``plan.txt`` (the plan and every group's configuration space), the
default candidate, and one candidate per other configuration of each group with the other groups at their default:

    OUT_DIR/<problem>/<arch>-<policy>/plan.txt, default.py, g<group>-c<config>.py

A refactoring of the generator that must not change its output is checked with ``diff -r BEFORE AFTER``. It runs on
the CPU: nothing is compiled or executed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from kernelwright.errors import InputError
from kernelwright.generate.emit import emit
from kernelwright.generate.families.base import DEFAULT_POLICY, Policy
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import load_families, plan

ROOT = Path(__file__).resolve().parent.parent
ARCHS = ("sm_90a", "sm_80")
POLICIES = {"default": DEFAULT_POLICY, "tf32": Policy(allow_tf32=True)}

log = logging.getLogger("snapshot_templates")


def problems_in(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for text in paths or [str(ROOT / "problems")]:
        path = Path(text)
        found += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return [p for p in found if not p.name.startswith("_")]


def snapshot(problem: Path, out: Path) -> int:
    """The problem's candidates under every arch and policy; how many files were written."""
    graph = capture(problem)
    families = {f.name: f for f in load_families()}
    the_plan = plan(graph, list(families.values()))
    title = f"kernelwright candidate for {problem.name}"  # as search/candidates.py titles them
    written = 0
    for arch in ARCHS:
        for policy_name, policy in POLICIES.items():
            directory = out / f"{arch}-{policy_name}"
            directory.mkdir(parents=True, exist_ok=True)
            spaces = [families[g.family].space(graph, g, arch, policy) for g in the_plan.groups]
            lines = list(the_plan.describe())
            for i, (group, space) in enumerate(zip(the_plan.groups, spaces)):
                lines.append(f"group {i}: inputs {group.inputs}, outputs {group.outputs}, anchor {group.anchor}")
                lines += [f"  config {j}: {sorted(config.items())}" for j, config in enumerate(space)]
            (directory / "plan.txt").write_text("\n".join(lines) + "\n")
            if not the_plan.groups:
                continue
            default = [space[0] for space in spaces]
            (directory / "default.py").write_text(emit(the_plan, families, default, title=title))
            written += 2
            for i, space in enumerate(spaces):
                for j in range(1, len(space)):
                    configs = list(default)
                    configs[i] = space[j]
                    (directory / f"g{i}-c{j}.py").write_text(emit(the_plan, families, configs, title=title))
                    written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write the snapshot to (created)")
    parser.add_argument("problems", nargs="*", help="problem files or directories (default: problems/)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    failures = 0
    for problem in problems_in(args.problems):
        start = time.perf_counter()
        target = args.out / problem.stem
        try:
            count = snapshot(problem, target)
        except InputError as exc:  # a problem the templates cannot capture: recorded, so a change shows in the diff
            target.mkdir(parents=True, exist_ok=True)
            (target / "error.txt").write_text(f"{exc}\n")
            failures += 1
            print(f"{problem.name}: {exc}", file=sys.stderr)
            continue
        print(f"{problem.name}: {count} files in {time.perf_counter() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
