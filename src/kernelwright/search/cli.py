"""``kernelwright optimize PROBLEM`` — exit 0 when the best candidate passed verification, 1 otherwise, 2 for bad
input (a problem that cannot be captured, or that no template covers)."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwright.deadline import Deadline

if TYPE_CHECKING:
    from kernelwright.search.request import SearchRequest

HELP = "write a verified kernel for a problem: the template library (no network), an LLM, or both"
# With --backward the forward's search gets this share of --budget; the backward's gets what the forward left.
FORWARD_SHARE = 0.6


def parse_budget(text: str) -> float:
    """'90s', '3m', '1h' -> seconds. A number without a unit is refused (is 5 seconds or minutes?), and so is a
    budget of nothing."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"budget {text!r} is not a duration such as 90s, 3m or 1h")
    if not match.group(2):
        raise argparse.ArgumentTypeError(f"budget {text!r} has no unit: write {match.group(1)}s or "
                                         f"{match.group(1)}m")
    value = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
    if value < 1:
        raise argparse.ArgumentTypeError(f"budget {text!r} leaves no time: give at least 1s")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("problem", help="KernelBench problem file (class Model, get_inputs, get_init_inputs)")
    p.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<problem name>)")
    p.add_argument("--budget", type=parse_budget, default=180.0, help="wall-time budget, e.g. 90s, 3m (default 3m)")
    p.add_argument("--generator", choices=("templates", "llm", "hybrid"), default="templates",
                   help="templates: the built-in library, no network (default); llm: an LLM in a closed loop with "
                        "the verifier; hybrid: the templates seed, the LLM improves")
    add_llm_arguments(p)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="cuda: tune and time on the GPU; cpu: prove the default configuration under the interpreter")
    add_target_arguments(p)
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the table")
    p.add_argument("--backward", action="store_true",
                   help="also write the op's backward as a problem (OUT/backward/problem.py) and optimize it with the "
                        "templates, within the same --budget (the forward's search gets 60%%, the backward what is "
                        "left); kernelwright export registers it as the op's backward")


def positive_int(text: str) -> int:
    """A whole number of at least 1 (``--limit``, ``--jobs``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """The target arch and the precision policy (``optimize``, ``bench``)."""
    p.add_argument("--arch", default=None, help="target arch for the instruction summary (default: the GPU's, else "
                                                "sm_90a)")
    p.add_argument("--no-model", dest="use_model", action="store_false",
                   help="time configurations in the templates' order, not the cost model's (kernelwright model "
                        "train; without a trained model the order is the templates' anyway)")
    p.add_argument("--no-ptx-rewrites", dest="ptx_rewrites", action="store_false",
                   help="do not time the tuned Triton leader with its PTX rewritten by the cache-hint passes "
                        "(the ptx_rewrites setting turns them off everywhere)")
    p.add_argument("--backend", choices=("triton", "cuda", "all"), default=None,
                   help="template back ends to search: triton, cuda (CUDA C++ with inline PTX: wgmma/TMA on sm_90a, "
                        "mma.sync/cp.async on sm_80, where a family has it) or all (default: the backend setting, all)")
    p.add_argument("--allow-tf32", action="store_true", help="let fp32 problems use TF32 tensor cores")
    p.add_argument("--allow-reduced-precision", action="store_true",
                   help="let fp32 problems compute in fp16/bf16 (the verifier's tolerance relaxes to match)")


def add_llm_arguments(p: argparse.ArgumentParser, *, run_options: bool = True) -> None:
    """The LLM generator's options (``optimize --generator llm|hybrid``, ``generate``, ``bench``); ``run_options``
    adds ``--db`` and ``--resume RUN_ID`` (bench has its own)."""
    llm = p.add_argument_group("the LLM generator")
    llm.add_argument("--strategy", choices=("best-of-n", "refine", "evolve"), default="refine",
                     help="best-of-n: independent samples; refine: lineages of rounds with feedback (default); "
                          "evolve: population, tournament selection, mutation and crossover")
    llm.add_argument("--samples", type=int, default=4, help="requests in flight: samples / lineages (default 4)")
    llm.add_argument("--model", default=None, help="model name (default: KERNELWRIGHT_LLM_MODEL, kernelwright.toml, "
                                                   "else deepseek-reasoner)")
    llm.add_argument("--base-url", default=None, help="OpenAI-compatible server (default: KERNELWRIGHT_LLM_BASE_URL, "
                                                      "kernelwright.toml, else https://api.deepseek.com)")
    llm.add_argument("--max-candidates", type=int, default=None, help="stop after this many responses")
    llm.add_argument("--max-tokens", type=int, default=None, help="stop after this many prompt+completion tokens")
    llm.add_argument("--language", choices=("triton", "cuda"), default="triton",
                     help="what the model writes: Triton, or CUDA C++ through load_inline")
    if not run_options:
        return
    llm.add_argument("--db", type=Path, default=None, help="run database (default: the cache's runs.sqlite)")
    llm.add_argument("--resume", type=int, default=None, metavar="RUN_ID",
                     help="continue a run that was stopped or killed (kernelwright runs lists them)")


def run(args: argparse.Namespace) -> int:
    from kernelwright.errors import InputError
    from kernelwright.generate.families.base import Policy
    from kernelwright.search.outputs import summary_json
    from kernelwright.search.progress import Progress
    from kernelwright.search.request import LLMOptions, SearchRequest
    from kernelwright.search.request import run as run_search

    out = args.out or Path("runs") / Path(args.problem).stem
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file: name a folder for the run's outputs (best.py, report.md, ...)")
    policy = Policy(allow_tf32=args.allow_tf32, allow_reduced_precision=args.allow_reduced_precision)
    # --budget is the command's: with --backward the forward gets its share and the backward the rest (the backward
    # was given the whole --budget again, and the command could take twice what the user asked).
    # One Deadline from here to every child job the search starts (kernelwright/deadline.py).
    deadline = Deadline.after(args.budget)
    forward = deadline.share(FORWARD_SHARE) if args.backward else deadline
    request = SearchRequest(problem=Path(args.problem), out_dir=out, deadline=forward, generator=args.generator,
                            device=args.device, arch=args.arch, policy=policy, backend=args.backend,
                            use_model=args.use_model, ptx_rewrites=args.ptx_rewrites, db_path=args.db,
                            llm=LLMOptions(strategy=args.strategy, samples=args.samples, model=args.model,
                                           base_url=args.base_url, resume=args.resume,
                                           max_candidates=args.max_candidates, max_tokens=args.max_tokens,
                                           language=args.language))
    if args.generator != "templates":
        status = _report_llm(args, out, run_search(request))
    else:
        result = run_search(replace(request, progress=Progress()))
        if args.json:
            print(summary_json(result))
        else:
            print((out / "report.md").read_text())
            print(f"written: {out}/best.py, verdict.json, candidates.csv, report.md", file=sys.stderr)
        best = result.best
        status = 0 if best is not None and best.verdict is not None and best.verdict.passed else 1
    if args.backward:
        status = max(status, _run_backward(args, out, replace(request, deadline=deadline, generator="templates")))
    return status


def _run_backward(args: argparse.Namespace, out: Path, request: SearchRequest) -> int:
    """The backward as a problem of its own in ``out/backward``: written, then optimized with the templates in what
    is left of the command's budget (``request``: the forward's, with the command's whole deadline)."""
    from kernelwright.errors import InputError
    from kernelwright.generate.backward import write_backward_problem
    from kernelwright.search.progress import Progress
    from kernelwright.search.request import run as run_search

    folder = out / "backward"
    try:
        problem = write_backward_problem(args.problem, folder / "problem.py")
    except InputError as exc:
        print(f"backward: not written: {exc}", file=sys.stderr)
        return 0
    if request.deadline.expired(margin_s=1.0):
        print(f"backward: written to {folder}/problem.py, not optimized: the forward's search and verify spent the "
              f"--budget ({args.budget:.0f}s); give a larger --budget, or optimize that problem on its own",
              file=sys.stderr)
        return 0
    try:
        result = run_search(replace(request, problem=problem.path, out_dir=folder, progress=Progress()))
    except InputError as exc:  # a backward with no compute (a sum's is an expand), or none a template covers
        print(f"backward: {exc}; the op's backward stays the reference's", file=sys.stderr)
        return 0
    best = result.best
    verdict = best.verdict if best is not None else None
    print(f"backward: {folder}/best.py — gradients of {', '.join(problem.gradients)}: "
          f"{verdict.status if verdict else 'no candidate'}" + (f" ({verdict.message})" if verdict else ""),
          file=sys.stderr)
    return 0 if verdict is not None and verdict.passed else 1


def _report_llm(args: argparse.Namespace, out: Path, result: Any) -> int:
    if args.json:
        print((out / "verdict.json").read_text() if (out / "verdict.json").exists() else "{}")
    else:
        print((out / "report.md").read_text())
        print(f"written: {out}/best.py, verdict.json, candidates.csv, report.md (run {result.run_id})",
              file=sys.stderr)
    best = result.best
    return 0 if best is not None and best.passed else 1
