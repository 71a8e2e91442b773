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
        "compile_default_ms": median("compile"),
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
        "interrupted": result.interrupted,
    }


def _claim(claims: Path | None, name: str) -> bool:
    """Whether this worker takes ``name`` (parallel workers share one queue: the first to create its claim file)."""
    if claims is None:
        return True
    try:
        (claims / name).open("x").close()
        return True
    except FileExistsError:
        return False


def run(args: argparse.Namespace) -> int:
    results_path = Path(args.results)
    results = _load(results_path)
    names = [n for n in args.problems.split(",") if n] if args.problems else sorted(
        p.stem for p in (ROOT / "problems").glob("*.py"))
    if args.skip_done:
        names = [n for n in names if (results.get(n) or {}).get("status") != "passed"]
    if args.jobs > 1 or args.gpus > 1:
        return _run_parallel(args, names, results_path)
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    claims = Path(args.claims) if args.claims else None
    for name in names:
        if not _claim(claims, name):
            continue
        row = _row(ROOT / "problems" / f"{name}.py", args.budget, Path(args.out))
        row.update(device=device, date=time.strftime("%Y-%m-%d"), jobs=args.jobs_total)
        if row.get("interrupted"):
            row["status"] = "interrupted"  # cut by Ctrl-C or the call's time limit: run again with --skip-done
        results[name] = row
        results_path.write_text(json.dumps(results, indent=1))
        print(json.dumps(row), flush=True)
        if row.get("interrupted"):
            # Stop here: a worker that went on to the next problem after its Ctrl-C kept a device call's
            # pipeline open past its limit (H200, 2026-12-02), and nothing it started would finish anyway.
            return 130
    return 0


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _parts(results_path: Path) -> list[Path]:
    return sorted(results_path.parent.glob(f"{results_path.stem}.part*{results_path.suffix}"))


def merge(results_path: Path) -> dict:
    """Fold the parallel workers' part files into the results file (also after a run cut short)."""
    results = _load(results_path)
    for part in _parts(results_path):
        results.update(_load(part))
    results_path.write_text(json.dumps(results, indent=1))
    for part in _parts(results_path):
        part.unlink()
    return results


def _run_parallel(args: argparse.Namespace, names: list[str], results_path: Path) -> int:
    """``--jobs`` workers per GPU over ``--gpus`` GPUs, taking problems from one queue (claim files).

    Workers that share a GPU share it through ``KERNELWRIGHT_GPU_LOCK`` (hardware/gpu_lock.py): their device work
    overlaps, but every measurement — candidate, baselines, tuning, calibration — has the device to itself. Each
    worker writes its rows to a part file as they finish; they are merged here at the end (or by ``merge`` after a
    run cut short)."""
    import os
    import subprocess
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="kw-suite-"))
    claims = scratch / "claims"
    claims.mkdir()
    procs = []
    for gpu in range(args.gpus):
        for slot in range(args.jobs):
            part = results_path.with_name(f"{results_path.stem}.part{gpu}-{slot}{results_path.suffix}")
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
            if args.jobs > 1:
                env["KERNELWRIGHT_GPU_LOCK"] = str(scratch / f"gpu{gpu}.lock")
            cmd = [sys.executable, __file__, "run", "--problems", ",".join(names), "--budget", str(args.budget),
                   "--results", str(part), "--out", str(Path(args.out)), "--claims", str(claims),
                   "--jobs-total", str(args.jobs * args.gpus)]
            procs.append(subprocess.Popen(cmd, env=env))
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        # The workers were interrupted too (same process group) or are told now; each writes the row it was on
        # before it stops, so wait for them before merging.
        import signal

        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.time() + 60
        for proc in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
        merge(results_path)
        return 130
    merge(results_path)
    return 0


def crosscheck(args: argparse.Namespace) -> int:
    """An independent ``triton.testing.do_bench`` of each passed row's best.py and of eager PyTorch, each problem in
    a fresh process (issue 12: the verifier's medians must agree within 5%)."""
    import subprocess

    sys.path.insert(0, str(ROOT / "scripts"))
    from gpu_validate import _DO_BENCH

    results_path = Path(args.results)
    results = _load(results_path)
    names = [n for n in args.problems.split(",") if n] if args.problems else sorted(results)
    for name in names:
        row = results.get(name) or {}
        best = Path(args.runs) / name / "best.py"
        if row.get("status") != "passed" or not best.exists():
            continue
        proc = subprocess.run([sys.executable, "-c", _DO_BENCH, str(ROOT / "problems" / f"{name}.py"), str(best),
                               "0"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        found: dict = {}
        for line in proc.stdout.splitlines():
            if line.startswith("DOBENCH "):
                found.update(json.loads(line[len("DOBENCH "):]))
        check = {"do_bench_candidate_ms": found.get("candidate"), "do_bench_eager_ms": found.get("eager")}
        if found.get("candidate") and row.get("kernelwright_ms"):
            check["candidate_ratio"] = row["kernelwright_ms"] / found["candidate"]
        if found.get("eager") and row.get("eager_ms"):
            check["eager_ratio"] = row["eager_ms"] / found["eager"]
        if not found:
            check["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        row["crosscheck"] = check
        results_path.write_text(json.dumps(results, indent=1))
        print(f"{name}: verify {_fmt(row.get('kernelwright_ms'))} / do_bench {_fmt(found.get('candidate'))} "
              f"(ratio {_fmt(check.get('candidate_ratio'), '.3f')}); eager {_fmt(row.get('eager_ms'))} / "
              f"{_fmt(found.get('eager'))} (ratio {_fmt(check.get('eager_ratio'), '.3f')}) {check.get('error', '')}",
              flush=True)
    return 0


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return format(value, spec) if value is not None else "-"


def table(args: argparse.Namespace) -> int:
    results = json.loads(Path(args.results).read_text())
    print("| problem | families | eager ms | compile ms | max-autotune ms | kernelwright ms | vs eager "
          "| vs compile | vs max-autotune | % floor | tensor cores | verdict | row s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for name in sorted(results):
        r = results[name]
        if "error" in r:
            print(f"| {name} | — | | | | | | | | | | {r['error'][:80]} | {r.get('wall_s', 0):.0f} |")
            continue
        k, e, c = r.get("kernelwright_ms"), r.get("eager_ms"), r.get("compile_ms")
        d = r.get("compile_default_ms")
        vs_e = e / k if e and k else None
        vs_c = c / k if c and k else None
        vs_d = d / k if d and k else None
        if vs_c:
            ratios.append(vs_c)
        print(f"| {name} | {'+'.join(r.get('families', []))} | {_fmt(e)} | {_fmt(d)} | {_fmt(c)} | {_fmt(k)} | "
              f"{_fmt(vs_e, '.2f')}x | {_fmt(vs_d, '.2f')}x | {_fmt(vs_c, '.2f')}x | "
              f"{_fmt(r.get('percent_of_floor'), '.0f')} | "
              f"{', '.join(r.get('tensor_core', [])) or '-'} | {r.get('status')} "
              f"{('(' + r['why'][:100] + ')') if r.get('why') else ''}| {r.get('wall_s', 0):.0f} |")
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
    p_run.add_argument("--skip-done", action="store_true", help="leave out problems that already passed in --results")
    p_run.add_argument("--jobs", type=int, default=1,
                       help="problems verified side by side per GPU (measurements still have the GPU to themselves)")
    p_run.add_argument("--claims", default="", help=argparse.SUPPRESS)
    p_run.add_argument("--jobs-total", type=int, default=1, help=argparse.SUPPRESS)
    p_check = sub.add_parser("crosscheck", help="do_bench each passed row's best.py in a fresh process")
    p_check.add_argument("--results", default="suite-results.json")
    p_check.add_argument("--runs", default="runs/suite", help="where `run --out` left the problems' runs")
    p_check.add_argument("--problems", default="")
    p_merge = sub.add_parser("merge", help="fold a cut parallel run's part files into --results")
    p_merge.add_argument("--results", default="suite-results.json")
    p_table = sub.add_parser("table")
    p_table.add_argument("--results", default="suite-results.json")
    args = parser.parse_args()
    if args.command == "merge":
        merge(Path(args.results))
        return 0
    if args.command == "crosscheck":
        return crosscheck(args)
    return run(args) if args.command == "run" else table(args)


if __name__ == "__main__":
    raise SystemExit(main())
