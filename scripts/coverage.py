"""How far the template families reach over folders of KernelBench problems, before anything is verified:

    python scripts/coverage.py ../shared/kernelbench/level1 ../shared/kernelbench/level2 --out coverage.json

Each problem is captured and planned (`generate/graph.py`'s capture, `generate/plan.py`) with a time limit, in this
process (or one of its own each, `--isolate`), exactly as `kernelwright optimize` starts: **full** (every operator that does
work is in a family's group), **partial** (the plan names what is left to PyTorch), **unsupported** (no family
claims anything), **error** (capture refused it: the one-line reason). Prints a markdown summary (per folder, the
operators most often left to PyTorch, every error) and writes the rows as JSON. A plan is not a proof: a full plan
still has to pass `kernelwright verify` (`kernelwright bench` does both).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

_ONE = """
import json, sys
from kernelwright.generate.graph import capture
from kernelwright.generate.plan import plan
try:
    graph = capture(sys.argv[1])
    the_plan = plan(graph, arch="sm_90a")
    uncovered = sorted({graph.node(n).op for n in the_plan.uncovered})
    status = "full" if not uncovered and the_plan.groups else "partial" if the_plan.groups else "unsupported"
    row = {"status": status, "families": [g.family for g in the_plan.groups], "uncovered": uncovered}
except Exception as exc:
    row = {"status": "error", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
print(json.dumps(row))
"""


def survey_here(path: Path, timeout_s: float) -> dict:
    """The same as :func:`survey`, in this process (capture's own time bound applies): no interpreter start-up
    per problem."""
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import plan

    started = time.monotonic()
    try:
        graph = capture(path, timeout_s=timeout_s)
        the_plan = plan(graph, arch="sm_90a")
        uncovered = sorted({graph.node(n).op for n in the_plan.uncovered})
        status = "full" if not uncovered and the_plan.groups else "partial" if the_plan.groups else "unsupported"
        row = {"status": status, "families": [g.family for g in the_plan.groups], "uncovered": uncovered}
    except Exception as exc:
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        row = {"status": "error", "error": f"{type(exc).__name__}: {first}"}
    return {"folder": path.parent.name, "name": path.stem, **row, "s": round(time.monotonic() - started, 1)}


def survey(path: Path, timeout_s: float) -> dict:
    started = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "-c", _ONE, str(path)], capture_output=True, text=True,
                             timeout=timeout_s)
        lines = run.stdout.strip().splitlines()
        row = json.loads(lines[-1]) if lines else {"status": "error", "error": run.stderr.strip()[-300:]}
    except subprocess.TimeoutExpired:
        row = {"status": "error", "error": f"capture and plan took more than {timeout_s:.0f} s"}
    return {"folder": path.parent.name, "name": path.stem, **row, "s": round(time.monotonic() - started, 1)}


def summary(rows: list[dict]) -> str:
    lines = ["| folder | problems | full | partial | unsupported | error |", "|---|---|---|---|---|---|"]
    by_folder: dict[str, list[dict]] = collections.defaultdict(list)
    for row in rows:
        by_folder[row["folder"]].append(row)
    for folder, group in by_folder.items():
        counts = collections.Counter(r["status"] for r in group)
        lines.append(f"| {folder} | {len(group)} | {counts['full']} | {counts['partial']} | "
                     f"{counts['unsupported']} | {counts['error']} |")
    left = collections.Counter(op for r in rows for op in r.get("uncovered", []))
    lines += ["", "Left to PyTorch, by problems: " + ", ".join(f"`{op}` {n}" for op, n in left.most_common(20))]
    errors = [r for r in rows if r["status"] == "error"]
    if errors:
        lines += ["", "Errors:"] + [f"- {r['folder']}/{r['name']}: {r['error']}" for r in errors]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per problem (default 240)")
    parser.add_argument("--isolate", action="store_true",
                        help="each problem in a process of its own (slower: torch is imported each time)")
    args = parser.parse_args()
    rows = []
    for folder in args.folders:
        files = sorted(folder.glob("*.py"), key=lambda p: (int(p.name.split("_")[0]) if p.name[0].isdigit()
                                                           else 10**9, p.name))
        for path in files:
            rows.append(survey(path, args.timeout) if args.isolate else survey_here(path, args.timeout))
            print(f"{rows[-1]['folder']}/{rows[-1]['name']}: {rows[-1]['status']} ({rows[-1]['s']} s)",
                  file=sys.stderr, flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
