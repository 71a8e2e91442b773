"""Prove every suite problem's default template candidate on the CPU (reduced sizes, Triton interpreter).

Usage: python scripts/check_templates.py [--problems a,b] [--out DIR]
Prints one line per problem: plan, verdict, seconds. Slow (about a minute a problem); not part of CI.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="")
    parser.add_argument("--out", default="/tmp/kernelwright-check-templates")
    args = parser.parse_args()
    import io

    from kernelwright.search.optimize import optimize
    from kernelwright.search.progress import Progress

    names = [n for n in args.problems.split(",") if n] or sorted(p.stem for p in (ROOT / "problems").glob("*.py"))
    failures = 0
    for name in names:
        started = time.time()
        try:
            result = optimize(ROOT / "problems" / f"{name}.py", out_dir=Path(args.out) / name, device="cpu",
                              progress=Progress(stream=io.StringIO()))
            verdict = result.best.verdict if result.best else None
            status = f"{verdict.status}: {verdict.message[:150]}" if verdict else "no verdict"
            ok = verdict is not None and verdict.passed
        except Exception as exc:
            status, ok = f"ERROR {type(exc).__name__}: {str(exc)[:150]}", False
        failures += not ok
        print(f"{'ok ' if ok else 'BAD'} {name:28s} {time.time() - started:5.0f}s  {status}", flush=True)
    print(f"{len(names) - failures}/{len(names)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
