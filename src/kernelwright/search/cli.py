"""``kernelwright optimize PROBLEM`` — exit 0 when the best candidate passed verification, 1 otherwise, 2 for bad
input (a problem that cannot be captured, or that no template covers)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HELP = "write a verified kernel for a problem from the template library (no network needed)"


def parse_budget(text: str) -> float:
    """'90', '90s', '3m', '1h' -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"budget {text!r} is not a duration such as 90s, 3m or 1h")
    value = float(match.group(1))
    return value * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("problem", help="KernelBench problem file (class Model, get_inputs, get_init_inputs)")
    p.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<problem name>)")
    p.add_argument("--budget", type=parse_budget, default=180.0, help="wall-time budget, e.g. 90s, 3m (default 3m)")
    p.add_argument("--generator", choices=("templates",), default="templates",
                   help="where candidates come from (the LLM generators are not built yet)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="cuda: tune and time on the GPU; cpu: prove the default configuration under the interpreter")
    p.add_argument("--arch", default=None, help="target arch for the instruction summary (default: the GPU's, else "
                                                "sm_90a)")
    p.add_argument("--allow-tf32", action="store_true", help="let fp32 problems use TF32 tensor cores")
    p.add_argument("--allow-reduced-precision", action="store_true",
                   help="let fp32 problems compute in fp16/bf16 (the verifier's tolerance relaxes to match)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the table")


def run(args: argparse.Namespace) -> int:
    from kernelwright.generate.families.base import Policy
    from kernelwright.search.optimize import Progress, optimize
    from kernelwright.search.outputs import summary_json

    out = args.out or Path("runs") / Path(args.problem).stem
    policy = Policy(allow_tf32=args.allow_tf32, allow_reduced_precision=args.allow_reduced_precision)
    result = optimize(args.problem, out_dir=out, budget_s=args.budget, device=args.device, arch=args.arch,
                      policy=policy, progress=Progress())
    if args.json:
        print(summary_json(result))
    else:
        print((out / "report.md").read_text())
        print(f"written: {out}/best.py, verdict.json, candidates.csv, report.md", file=sys.stderr)
    best = result.best
    return 0 if best is not None and best.verdict is not None and best.verdict.passed else 1
