"""An independent ``triton.testing.do_bench`` of each passed, timed row of a bench (issue 12: the verifier's
medians must agree with it within 5%), each problem in a fresh process, on the GPU machine:

    python3 scripts/crosscheck.py BENCH_DIR/results.json [--problems a,b] [--limit 5]

Prints one line per problem (verify's median, do_bench's, their ratio; the same for eager) and writes
``crosscheck.json`` beside the results.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> int:
    from gpu_validate import _DO_BENCH

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--problems", default="")
    parser.add_argument("--limit", type=int, default=0, help="at most this many rows (0: all)")
    args = parser.parse_args()
    doc = json.loads(args.results.read_text())
    wanted = {n for n in args.problems.split(",") if n}
    rows = [r for r in doc["problems"] if r["status"] == "passed" and r.get("timed") and r.get("best_py")
            and (not wanted or r["name"] in wanted)]
    if args.limit:
        rows = rows[: args.limit]
    checks = {}
    for row in rows:
        proc = subprocess.run([sys.executable, "-c", _DO_BENCH, row["path"], row["best_py"], "0"], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        found = {}
        for line in proc.stdout.splitlines():
            if line.startswith("DOBENCH "):
                found.update(json.loads(line[len("DOBENCH "):]))
        ours, eager = row["ms"]["candidate"], row["ms"]["eager"]
        check = {"verify_ms": ours, "do_bench_ms": found.get("candidate"), "verify_eager_ms": eager,
                 "do_bench_eager_ms": found.get("eager")}
        check["ratio"] = ours / found["candidate"] if found.get("candidate") else None
        check["eager_ratio"] = eager / found["eager"] if found.get("eager") and eager else None
        if not found:
            check["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        checks[row["name"]] = check
        (args.results.parent / "crosscheck.json").write_text(json.dumps(checks, indent=1))
        ratio = f"{check['ratio']:.3f}" if check["ratio"] else "-"
        eratio = f"{check['eager_ratio']:.3f}" if check["eager_ratio"] else "-"
        print(f"{row['name']}: verify {ours} / do_bench {found.get('candidate')} (ratio {ratio}); eager "
              f"{eager} / {found.get('eager')} (ratio {eratio}) {check.get('error', '')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
