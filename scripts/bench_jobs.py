"""How fast a job starts (issue 42): forked from a warm zygote against a fresh interpreter, side by side in one run,
and what that makes of a whole verify. Prints two tables (markdown) for docs/benchmarks.md.

    python scripts/bench_jobs.py [--runs 9] [--verifies 3] [--device cpu|cuda] [--problem P --candidate C]

Table 1, one job: the probe job over the problem (import the problem, one forward at reduced sizes on the CPU), its
wall time in ``run_child`` and the time to its first (only) message; the zygote's own start (its imports, paid
once per interpreter setting) is its own row. Table 2: whole verifies of the candidate, with each phase's seconds.
Runs are interleaved, so a loaded machine weighs on both sides alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def _probe(problem: Path, device: str, work: Path) -> tuple[float, float, bool]:
    from kernelwright.isolation.process import run_child
    from kernelwright.isolation.protocol import JobError
    from kernelwright.jobs import ProbeResult, ProbeSpec

    started = time.monotonic()
    run = run_child("probe", ProbeSpec(problem=str(problem), device=device), workdir=work, timeout_s=300,
                    device=device, keep=(str(problem),))
    wall = time.monotonic() - started
    result = run.report(ProbeResult)
    if result is None or not result.ok:
        error = run.report(JobError)
        raise SystemExit(f"the probe job failed: {result.message if result else run.describe_exit()}"
                         f"{': ' + error.message if error else ''}\n{run.stderr_tail}")
    return wall, run.first_message_s or wall, run.forked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--verifies", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--problem", type=Path, default=ROOT / "examples/problems/softmax_small.py")
    parser.add_argument("--candidate", type=Path, default=ROOT / "examples/softmax_triton.py")
    args = parser.parse_args()
    args.problem, args.candidate = args.problem.resolve(), args.candidate.resolve()  # the job runs in its own folder

    from kernelwright.config import config
    from kernelwright.isolation import zygote
    from kernelwright.verify.records import VerifyOptions
    from kernelwright.verify.verifier import verify

    settings = {"zygote": True, "fresh interpreter": False}
    jobs: dict[str, dict[str, list[float]]] = {s: {"wall": [], "first": []} for s in settings}
    phases: dict[str, list[dict[str, float]]] = {s: [] for s in settings}
    walls: dict[str, list[float]] = {s: [] for s in settings}
    with tempfile.TemporaryDirectory() as tmp:
        with config.scope(job_zygote=True):  # the zygote's own start, once
            started = time.monotonic()
            _probe(args.problem, args.device, Path(tmp, "warm"))
            first_job_s = time.monotonic() - started
        for i in range(args.runs):
            for name, on in settings.items():
                with config.scope(job_zygote=on):
                    wall, first, forked = _probe(args.problem, args.device, Path(tmp, f"p{i}-{on}"))
                assert forked is on, f"{name}: the job was {'forked' if forked else 'a fresh interpreter'}"
                jobs[name]["wall"].append(wall)
                jobs[name]["first"].append(first)
        for _ in range(args.verifies):
            for name, on in settings.items():
                with config.scope(job_zygote=on):
                    started = time.monotonic()
                    verdict = verify(args.problem, args.candidate,
                                     VerifyOptions(device=args.device, compile_baseline=False))
                    walls[name].append(time.monotonic() - started)
                if str(verdict.status) != "passed":
                    raise SystemExit(f"verify ({name}): {verdict.status}: {verdict.message}")
                phases[name].append(dict(verdict.phases))
    zygote.discard_zygotes()

    print(f"| one job ({args.device}, probe of {args.problem.name}, {args.runs} runs) | wall s (median) | "
          "first message s | min wall s |")
    print("|---|---|---|---|")
    for name in settings:
        print(f"| {name} | {_median(jobs[name]['wall'])} | {_median(jobs[name]['first'])} | "
              f"{min(jobs[name]['wall']):.2f} |")
    print(f"| the first job, the zygote's start included | {first_job_s:.2f} | | |")
    ratio = statistics.median(jobs["fresh interpreter"]["wall"]) / statistics.median(jobs["zygote"]["wall"])
    print(f"\nforked jobs start {ratio:.1f}x faster (median wall)\n")
    names = sorted({k for runs in phases.values() for p in runs for k in p})
    print(f"| verify ({args.device}, {args.problem.name} + {args.candidate.name}, {args.verifies} runs) | wall s | "
          + " | ".join(f"{n} s" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for name in settings:
        cells = [_median([p.get(n, 0.0) for p in phases[name]]) for n in names]
        print(f"| {name} | {_median(walls[name])} | " + " | ".join(cells) + " |")
    print(f"\npython {sys.version.split()[0]}; the first verify of each setting included (its zygote is warm by then)")


if __name__ == "__main__":
    main()
