"""``kernelwright generate "REQUEST"`` — from a plain-language request to a verified kernel.

1. The LLM writes a KernelBench reference problem (``Model``, ``get_inputs``, ``get_init_inputs``) for the request.
2. The problem is proven to run — in the verifier's isolated child, since the model wrote it: it builds, runs once
   and gives finite outputs. A response without a usable problem, or a problem that fails, goes back to the model
   (up to three tries).
3. The problem is shown and saved (``OUT/<name>.py``, with the exchange in ``OUT/problem-request.json``), then
   optimized as a normal problem by the LLM generator (``--no-optimize`` stops after step 2). ``--resume RUN``
   continues that run with the problem file it was for; the model is not asked for a problem again.

Exit codes: 0 a verified kernel (or, with ``--no-optimize``, a problem that runs), 1 none, 2 bad invocation.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HELP = "turn a plain-language request into a reference problem, prove it runs, and optimize it with the LLM"
PROBLEM_TRIES = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    from kernelwright.search.cli import add_llm_arguments, parse_budget

    p.add_argument("request", help='what to build, e.g. "fused RMSNorm + residual add for 8192x4096 bf16"')
    p.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<name from the request>)")
    p.add_argument("--budget", type=parse_budget, default=600.0, help="wall-time budget, e.g. 10m (default 10m)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None)
    p.add_argument("--arch", default=None, help="target arch (default: the GPU's, else sm_90a)")
    p.add_argument("--allow-tf32", action="store_true", help="let fp32 problems use TF32 tensor cores")
    p.add_argument("--allow-reduced-precision", action="store_true",
                   help="let fp32 problems compute in fp16/bf16 (the verifier's tolerance relaxes to match)")
    p.add_argument("--no-optimize", action="store_true", help="stop once the problem is written and proven to run")
    add_llm_arguments(p)


def slug(request: str) -> str:
    words = re.findall(r"[a-z0-9]+", request.lower())
    return "_".join(words[:6])[:48] or "problem"


def run(args: argparse.Namespace) -> int:
    from kernelwright.deadline import Deadline
    from kernelwright.errors import InputError
    from kernelwright.generate.families.base import Policy
    from kernelwright.hardware.local import resolve_device
    from kernelwright.llm.client import LLMClient, LLMError
    from kernelwright.llm.settings import resolve_settings

    if not args.request.strip():
        raise InputError("the request is empty: say what to build, e.g. \"softmax over the last dim of 4096x8192 "
                         "fp32\"")
    name = slug(args.request)
    device = resolve_device(args.device)
    if args.resume is not None:  # the run's own problem: a new answer from the model would be another problem
        problem, run_out = resumed_problem(args.resume, args.db, device=device)
        out: Path = args.out or run_out
    else:
        out = args.out or Path("runs") / name
        out.mkdir(parents=True, exist_ok=True)
        settings = resolve_settings(model=args.model, base_url=args.base_url)
        with LLMClient(settings) as client:
            try:
                problem = write_problem(args.request, out / f"{name}.py", client=client, device=device)
            except LLMError as exc:
                raise InputError(f"no problem written: {exc}") from None  # the message says what failed
        if problem is None:
            print(f"kernelwright generate: no usable problem after {PROBLEM_TRIES} tries; the exchange is in "
                  f"{out / 'problem-request.json'}", file=sys.stderr)
            return 1
        if args.no_optimize:
            return 0
    from kernelwright.search.request import LLMOptions, SearchRequest
    from kernelwright.search.request import run as run_search

    evaluator = None
    if device != "cuda":
        from kernelwright.hardware.local import target_arch
        from kernelwright.search.evaluate import CpuEvaluator

        # The reduced sizes were worked out in the probe's child: the model-written problem never runs here.
        evaluator = CpuEvaluator(problem.path, arch=target_arch(device, args.arch),
                                 policy=Policy(allow_tf32=args.allow_tf32,
                                               allow_reduced_precision=args.allow_reduced_precision),
                                 size_overrides=problem.reduced_sizes)
    deadline = Deadline.after(args.budget)  # the search's (writing the problem is not counted)
    result = run_search(SearchRequest(
        problem=problem.path, out_dir=out, deadline=deadline, generator="llm", device=device, arch=args.arch,
        policy=Policy(allow_tf32=args.allow_tf32, allow_reduced_precision=args.allow_reduced_precision),
        db_path=args.db, evaluator=evaluator,
        llm=LLMOptions(strategy=args.strategy, samples=args.samples, model=args.model, base_url=args.base_url,
                       resume=args.resume, max_candidates=args.max_candidates, max_tokens=args.max_tokens,
                       language=args.language)))
    print((out / "report.md").read_text())
    print(f"written: {problem.path}, {out}/best.py, verdict.json, candidates.csv, report.md (run {result.run_id})",
          file=sys.stderr)
    return 0 if result.best is not None and result.best.passed else 1


class WrittenProblem:
    def __init__(self, path: Path, reduced_sizes: dict[str, int]) -> None:
        self.path, self.reduced_sizes = path, reduced_sizes


def resumed_problem(run_id: int, db_path: Path | None, *, device: str) -> tuple[WrittenProblem, Path]:
    """``--resume RUN``: the problem file the run was for (unchanged), proven to run again in the isolated child
    (which also works out the reduced CPU sizes), and the run's folder."""
    from kernelwright.errors import InputError
    from kernelwright.search.db import RunDB, source_sha256
    from kernelwright.verify.probe import probe_problem

    with RunDB(db_path, create=False) as db:
        row = db.run(run_id)
    path = Path(row.problem_path)
    if not path.is_file() or source_sha256(path.read_text()) != row.problem_sha256:
        raise InputError(f"run {run_id} was for the problem {path}, which is gone or changed since; resume from the "
                         "folder the run started in, or start a new run")
    probe = probe_problem(path, device=device)
    if not probe.ok:
        raise InputError(f"run {run_id}'s problem {path} does not run: {probe.message}")
    return WrittenProblem(path, probe.reduced_sizes), Path(row.settings.get("out_dir") or path.parent)


def write_problem(request: str, path: Path, *, client, device: str) -> WrittenProblem | None:
    """Ask for the problem, prove it runs in the isolated child, feed failures back; the problem or None."""
    from kernelwright.llm.parse import ParseFailure, extract_problem
    from kernelwright.llm.prompting import build_problem_messages
    from kernelwright.verify.probe import probe_problem

    messages = build_problem_messages(request)
    exchange: list[dict] = []
    try:
        for attempt in range(1, PROBLEM_TRIES + 1):
            completion = client.complete(messages, tag=f"problem-{attempt}")
            record = {"attempt": attempt, "messages": messages, "response": completion.text,
                      "reasoning": completion.reasoning}
            exchange.append(record)
            try:
                source = extract_problem(completion.text, finish_reason=completion.finish_reason)
            except ParseFailure as exc:
                record["failure"] = str(exc)
            else:
                path.write_text(source)
                probe = probe_problem(path, device=device)
                record["probe"] = probe.message
                if probe.ok:
                    print(f"# {path} — {probe.message}\n\n{source}", flush=True)
                    return WrittenProblem(path, probe.reduced_sizes)
                record["failure"] = f"the problem does not run: {probe.message}"
            print(f"kernelwright generate: try {attempt}: {record['failure']}", file=sys.stderr)
            # Only the answer's text goes back, never its reasoning.
            messages = [*messages, {"role": "assistant", "content": completion.text},
                        {"role": "user", "content": f"That answer could not be used: {record['failure']}. Answer "
                                                    "again with the complete corrected file in one python block."}]
        return None
    finally:
        (path.parent / "problem-request.json").write_text(json.dumps(exchange, indent=1) + "\n")
