"""``kernelwright bench PROBLEMS... [--out DIR]`` — score a folder of problems (ours, or KernelBench's levels,
unmodified) in one resumable command: each problem optimized, or its ``ModelNew`` from ``--solutions`` verified;
rows stored as they finish; ``results.json``, ``report.md`` and ``report.html`` written at the end (and on Ctrl-C).

Exit status: 0 when the bench ran (whatever the problems' verdicts: a failing problem is a row), 2 for a bad
invocation (no problem files, a solutions folder with nothing matching, a bad flag), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "score a folder of problems (ours or KernelBench's) or of outside solutions: resumable, within a budget"

_BASELINE_NAMES = {"eager": "eager", "compile": "compile", "max-autotune": "compile_max_autotune"}


def _baselines(text: str) -> tuple[str, ...]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in _BASELINE_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"--baselines {text!r}: choose from {', '.join(_BASELINE_NAMES)} "
                                         "(comma-separated)")
    return tuple(dict.fromkeys(["eager", *(_BASELINE_NAMES[n] for n in names)]))  # eager: the speedup's basis


def add_arguments(p: argparse.ArgumentParser) -> None:
    from kernelwright.bench.executor import EXECUTORS
    from kernelwright.search.cli import add_llm_arguments, add_target_arguments, parse_budget, positive_int
    from kernelwright.verify.cli import add_executed_argument, add_sanitize_argument

    p.add_argument("problems", nargs="+", help="problem files or folders of them (KernelBench's level folders work "
                                               "as they are)")
    p.add_argument("--out", type=Path, default=Path("bench"), help="output folder (default ./bench)")
    p.add_argument("--solutions", type=Path, default=None,
                   help="score the ModelNew files in this folder (matched to problems by file name) instead of "
                        "generating kernels")
    p.add_argument("--generator", choices=("templates", "llm", "hybrid"), default="templates",
                   help="what writes the kernels, as in optimize: templates (the built-in library, no network), "
                        "llm, or hybrid (the templates seed, the LLM improves)")
    p.add_argument("--budget-per-problem", type=parse_budget, default=180.0, dest="budget_per_problem",
                   help="wall-time budget of one problem's search, e.g. 90s, 3m (default 3m); with --solutions, "
                        "of its verify")
    p.add_argument("--verify-limit", type=parse_budget, default=600.0, dest="verify_limit",
                   help="how long the winner's verify (with the baselines) may run past the search's budget "
                        "(default 10m): a row without its baselines says nothing")
    p.add_argument("--budget", type=parse_budget, default=None,
                   help="the whole bench's budget: when it runs out what is done is written and the rest is listed "
                        "as not run (default: none)")
    p.add_argument("--resume", action="store_true",
                   help="skip problems this bench already finished on this machine (same problem, device, "
                        "versions, kernelwright source and settings; rows are kept in the run database)")
    p.add_argument("--baselines", type=_baselines, default=("eager", "compile", "compile_max_autotune"),
                   help="baselines to time: eager,compile,max-autotune (default all; eager is always timed). "
                        "Their timings are cached per problem, device and toolchain and reused")
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="problems worked on side by side (default: one per GPU, 1 on the CPU); on a GPU their "
                        "measurements never overlap")
    p.add_argument("--gpus", default=None,
                   help="the GPUs a local bench spreads its jobs over: 'all' (default) or a list such as 0,2 "
                        "(CUDA_VISIBLE_DEVICES names); each GPU has its own workers and lock")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: worker processes on this machine (default); ray: Ray tasks over a Ray cluster, "
                        "each given a GPU (or a share of one) by Ray's scheduler")
    p.add_argument("--ray-address", default=None, dest="ray_address",
                   help="with --executor ray: the cluster to use ('auto': the one `ray start --head` started "
                        "here; default: a cluster of this machine started for the bench)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="cuda: time on the GPU; cpu: correctness and coverage only (default: auto)")
    add_sanitize_argument(p, "each winner's (or solution's) forward")
    add_executed_argument(p)
    add_target_arguments(p)
    p.add_argument("--format", choices=("all", "md", "json"), default="all",
                   help="all: results.json, report.md and report.html (default); md: print the markdown table "
                        "too; json: print results.json")
    p.add_argument("--db", type=Path, default=None, help="run database (default: the cache's runs.sqlite)")
    add_llm_arguments(p, run_options=False)


def run(args: argparse.Namespace) -> int:
    from kernelwright.bench import executor
    from kernelwright.errors import InputError

    if args.executor != "ray" and args.ray_address is not None:
        raise InputError("--ray-address is for --executor ray: add --executor ray, or leave the address out")
    with executor.session(args.executor, args.ray_address):
        return _run(args)


def _resolve_placement(args: argparse.Namespace) -> tuple[str, tuple[str, ...], int]:
    """(device, GPUs to spread over, jobs) from --device, --gpus, --jobs and the executor."""
    from kernelwright.bench import executor
    from kernelwright.errors import InputError
    from kernelwright.hardware.local import resolve_device

    if args.executor == "ray":
        if args.gpus is not None:
            raise InputError("--gpus is for a local bench: with --executor ray, Ray places the tasks on the GPUs "
                             "its nodes offer (ray start --num-gpus N); leave --gpus out")
        ray = executor.connect_ray(args.ray_address)
        device = args.device if args.device in ("cpu", "cuda") else ("cuda" if executor.ray_gpus(ray) else "cpu")
        return device, (), args.jobs or (0 if device == "cuda" else 1)  # 0: one per GPU of the cluster
    device = resolve_device(args.device)
    if device != "cuda":
        if args.gpus is not None:
            raise InputError(f"--gpus {args.gpus}: this bench runs on the CPU (nothing timed); it applies to "
                             "--device cuda")
        return device, (), args.jobs or 1
    gpus = executor.parse_gpus(args.gpus or "all", executor.visible_gpus())
    return device, gpus, args.jobs or max(1, len(gpus))


def _run(args: argparse.Namespace) -> int:
    import json

    from kernelwright.bench.collect import collect_problems, match_solutions
    from kernelwright.bench.report import write_outputs
    from kernelwright.bench.runner import BenchSettings, run_bench
    from kernelwright.errors import InputError
    from kernelwright.records import Policy

    problems = collect_problems(args.problems)
    if args.solutions is not None:
        problems = match_solutions(problems, args.solutions)
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} is a file: name a folder for the bench's outputs")
    device, gpus, jobs = _resolve_placement(args)
    settings = BenchSettings(out_dir=args.out.resolve(), device=device, generator=args.generator,
                             budget_per_problem_s=args.budget_per_problem,
                             verify_limit_s=args.verify_limit, budget_s=args.budget, arch=args.arch,
                             policy=Policy(allow_tf32=args.allow_tf32,
                                           allow_reduced_precision=args.allow_reduced_precision),
                             baselines=args.baselines, jobs=jobs, executor=args.executor, gpus=gpus,
                             ray_address=args.ray_address, sanitize=args.sanitize, executed=not args.no_executed,
                             resume=args.resume,
                             backend=args.backend, use_model=args.use_model,
                             ptx_rewrites=args.ptx_rewrites,
                             db_path=args.db,
                             solutions=args.solutions is not None,
                             llm={"strategy": args.strategy, "samples": args.samples, "model": args.model,
                                  "base_url": args.base_url, "max_candidates": args.max_candidates,
                                  "max_tokens": args.max_tokens, "language": args.language}
                             if args.generator != "templates" else {})
    if args.solutions is not None:
        missing = [p.name for p in problems if p.solution is None]
        if missing:
            print(f"kernelwright bench: no solution for {len(missing)} problem(s) ({', '.join(missing[:5])}"
                  f"{', ...' if len(missing) > 5 else ''}): scored as failures", file=sys.stderr)
    outcome = run_bench(problems, settings)
    formats = ("json", "md", "html")
    try:
        written = write_outputs(outcome, settings.out_dir, formats=formats)
    except ImportError:
        written = write_outputs(outcome, settings.out_dir, formats=("json", "md"))
        print("kernelwright bench: report.html needs matplotlib (pip install 'kernelwright[report]'); wrote "
              "results.json and report.md", file=sys.stderr)
    if args.format == "md":
        print(written["md"].read_text())
    elif args.format == "json":
        print(written["json"].read_text())
    else:
        doc = json.loads(written["json"].read_text())
        s = doc["summary"]
        line = f"{s['passed']} of {s['problems']} passed"
        if doc["timed"]:
            g = s["geomean_speedup"]
            line += "; geomean " + ", ".join(f"{(g[b] or 0):.2f}x vs {n}" for b, n in (
                ("eager", "eager"), ("compile", "torch.compile"), ("compile_max_autotune", "max-autotune")) if g[b])
        else:
            line += " (nothing timed: no GPU)"
        waiting = sorted({n for names in (s.get("pending") or {}).values() for n in names})
        if waiting:
            line += f"; {len(waiting)} row(s) with baselines pending (--resume times them)"
        print(f"kernelwright bench: {line}. Written: " + ", ".join(str(p) for p in written.values()))
    return 130 if outcome.interrupted else 0
