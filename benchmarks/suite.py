"""Run ``kernelwright optimize`` over the problem suite on a GPU and tabulate the results (issue 5's benchmark).

Device calls are limited to minutes, so results accumulate in a JSON file across calls and the table is
rendered from it:

    python benchmarks/suite.py run --problems softmax,layernorm --budget 2m --results $OUT/suite.json
    python benchmarks/suite.py table --results suite.json >> docs/benchmarks.md

Each row: problem, families used, eager / torch.compile (max-autotune-no-cudagraphs) / kernelwright medians from
the winner's verdict (all timed side by side by the verifier), speedups, % of the achievable roofline floor,
tensor-core instruction classes found in the winning kernels, and the verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _row(problem: Path, budget: float, out_root: Path) -> dict:
    from kernelwright.search.optimize import optimize

    started = time.time()
    try:
        result = optimize(problem, out_dir=out_root / problem.stem, budget_s=budget, device="cuda")
    except Exception as exc:  # a problem no template covers, a capture failure: a row that says so
        return {"problem": problem.stem, "error": f"{type(exc).__name__}: {exc}"[:300],
                "wall_s": time.time() - started}
    best = result.best
    verdict = best.verdict if best else None
    timing = verdict.timing if verdict else {}

    def median(name: str) -> float | None:
        return (timing.get(name) or {}).get("median_ms")

    from kernelwright.inspect.sass import TENSOR_CLASSES, classify

    # Tensor-core opcodes of the winning kernels, by name without modifiers (HGMMA, HMMA, QGMMA, ...).
    tensor = sorted({op.split(".")[0] for k in (verdict.instructions if verdict else ())
                     for op in (k.get("histogram_by_opcode") or {}) if classify(op) in TENSOR_CLASSES})
    return {
        "problem": problem.stem,
        "families": [g.family for g in result.plan.groups],
        "uncovered": result.plan.describe()[-1] if result.plan.uncovered else "",
        "status": str(verdict.status) if verdict else (best.status if best else "none"),
        "eager_ms": median("eager"),
        "compile_ms": median("compile_max_autotune") or median("compile"),
        "kernelwright_ms": median("candidate"),
        "percent_of_floor": verdict.percent_of_floor if verdict else None,
        "tensor_core": tensor,
        "candidates": len(result.outcomes),
        "verify_phases": dict(verdict.phases) if verdict else {},
        # Why nothing won, when nothing did: the first candidate's error, so a table row is never a bare "failed".
        "why": "" if verdict and str(verdict.status) == "passed" else next(
            (f"{o.status}: {o.error}"[:200] for o in result.outcomes if o.error), ""),
        "wall_s": time.time() - started,
    }


def run(args: argparse.Namespace) -> int:
    results_path = Path(args.results)
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    names = [n for n in args.problems.split(",") if n] if args.problems else sorted(
        p.stem for p in (ROOT / "problems").glob("*.py"))
    if args.skip_done:
        names = [n for n in names if n not in results or "error" in results[n]]
    if args.gpus > 1:
        return _run_on_gpus(args, names, results_path, results)
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    for name in names:
        row = _row(ROOT / "problems" / f"{name}.py", args.budget, Path(args.out))
        row.update(device=device, date=time.strftime("%Y-%m-%d"))
        results[name] = row
        results_path.write_text(json.dumps(results, indent=1))
        print(json.dumps(row), flush=True)
    return 0


def _run_on_gpus(args: argparse.Namespace, names: list[str], results_path: Path, results: dict) -> int:
    """One worker process per GPU (``CUDA_VISIBLE_DEVICES``), problems dealt round-robin; each GPU times only its
    own problems, so nothing shares a device while it is timed. The workers' rows are merged at the end (and as
    each worker finishes), so a run cut short keeps what finished."""
    import os
    import subprocess

    procs = []
    for gpu in range(args.gpus):
        mine = names[gpu::args.gpus]
        if not mine:
            continue
        part = results_path.with_name(f"{results_path.stem}.gpu{gpu}{results_path.suffix}")
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
        cmd = [sys.executable, __file__, "run", "--problems", ",".join(mine), "--budget", str(args.budget),
               "--results", str(part), "--out", str(Path(args.out) / f"gpu{gpu}")]
        procs.append((subprocess.Popen(cmd, env=env), part))
    for proc, part in procs:
        proc.wait()
        if part.exists():
            results.update(json.loads(part.read_text()))
            results_path.write_text(json.dumps(results, indent=1))
    return 0


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return format(value, spec) if value is not None else "-"


def table(args: argparse.Namespace) -> int:
    results = json.loads(Path(args.results).read_text())
    print("| problem | families | eager ms | compile ms | kernelwright ms | vs eager | vs compile | % floor "
          "| tensor cores | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for name in sorted(results):
        r = results[name]
        if "error" in r:
            print(f"| {name} | — | | | | | | | | {r['error'][:80]} |")
            continue
        k, e, c = r.get("kernelwright_ms"), r.get("eager_ms"), r.get("compile_ms")
        vs_e = e / k if e and k else None
        vs_c = c / k if c and k else None
        if vs_c:
            ratios.append(vs_c)
        print(f"| {name} | {'+'.join(r.get('families', []))} | {_fmt(e)} | {_fmt(c)} | {_fmt(k)} | "
              f"{_fmt(vs_e, '.2f')}x | {_fmt(vs_c, '.2f')}x | {_fmt(r.get('percent_of_floor'), '.0f')} | "
              f"{', '.join(r.get('tensor_core', [])) or '-'} | {r.get('status')} "
              f"{('(' + r['why'][:100] + ')') if r.get('why') else ''}|")
    if ratios:
        geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\nGeometric mean speedup over torch.compile (max-autotune-no-cudagraphs): {geomean:.2f}x "
              f"over {len(ratios)} problems.")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run")
    p_run.add_argument("--problems", default="", help="comma-separated problem names (default: all of problems/)")
    from kernelwright.search.cli import parse_budget

    p_run.add_argument("--budget", type=parse_budget, default=120.0, help="per problem, e.g. 90s or 2m (default 2m)")
    p_run.add_argument("--results", default="suite-results.json")
    p_run.add_argument("--out", default="runs/suite")
    p_run.add_argument("--gpus", type=int, default=1, help="problems spread over this many GPUs, one process each")
    p_run.add_argument("--skip-done", action="store_true", help="leave out problems already in --results")
    p_table = sub.add_parser("table")
    p_table.add_argument("--results", default="suite-results.json")
    args = parser.parse_args()
    return run(args) if args.command == "run" else table(args)


if __name__ == "__main__":
    raise SystemExit(main())
