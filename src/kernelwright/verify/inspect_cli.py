"""``kernelwright inspect`` as the command line runs it: :mod:`kernelwright.inspect.cli`'s inspection of compiled
artefacts (.cu, .ptx, .cubin, .so), plus the one input that has to be *run* to be inspected — a ``.py`` candidate,
whose kernels are found by the verifier (in its isolated child) and compiled for each requested arch.

The verifier sits above the instruction tools (it imports them for its evidence), so the path that needs it lives
here, in the verifier's room, and inspect/ never imports upward; ``kernelwright.cli`` dispatches ``inspect`` to
this module.
"""

from __future__ import annotations

import argparse
from typing import Any

from kernelwright.errors import InputError
from kernelwright.inspect.cli import HELP, requested_archs, run, traits
from kernelwright.inspect.cli import add_arguments as _inspect_arguments

__all__ = ["HELP", "add_arguments", "executed_evidence", "inspect_candidate", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _inspect_arguments(parser)
    parser.set_defaults(inspect_candidate=inspect_candidate)


def inspect_candidate(args: argparse.Namespace) -> dict[str, Any]:
    """Kernels of a .py candidate: the verifier runs it (isolated) and returns the instruction summaries of the
    kernels it launched, compiled for each requested arch; ``--executed`` adds Nsight Compute counts on a GPU."""
    if args.problem is None:
        raise InputError("a .py candidate needs --problem PROBLEM.py: its kernels are found by running it")
    from kernelwright.inspect.analysis import KernelSummary
    from kernelwright.verify.verifier import VerifyOptions, verify

    archs = tuple(requested_archs(args))
    verdict = verify(args.problem, args.path, options=VerifyOptions(inspect_archs=archs, timing=False,
                                                                     compile_baseline=False))
    summaries = [k if isinstance(k, KernelSummary) else KernelSummary.from_json(k) for k in verdict.instructions]
    report: dict[str, Any] = {
        "kernels": [k.to_json() for k in summaries],
        "findings": [f if isinstance(f, dict) else f.to_json() for f in verdict.findings],
        "verdict": {"status": str(getattr(verdict, "status", "")), "archs": list(archs),
                    # kernels compiled with the arguments of a run at these sizes (no GPU: reduced for speed)
                    "size_overrides": dict(getattr(verdict, "size_overrides", None) or {})},
    }
    if args.executed:
        report["executed"] = executed_evidence(args, summaries)
    return report


def executed_evidence(args: argparse.Namespace, summaries: list[Any]) -> dict[str, Any]:
    import sys

    from kernelwright.inspect import ncu
    from kernelwright.isolation.process import scrubbed_environment

    program = [sys.executable, "-m", "kernelwright.inspect.ncu_driver", str(args.path), "--problem", str(args.problem)]
    launches = ncu.run_ncu(program, env=scrubbed_environment())
    merged = ncu.merge_launches(launches)
    findings = ncu.compare(summaries, merged, traits(args) if args.dominant else None)
    return {"kernels": [k.to_json() for k in merged], "findings": [f.to_json() for f in findings]}
