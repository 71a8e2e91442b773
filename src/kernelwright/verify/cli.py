"""``kernelwright verify PROBLEM CANDIDATE`` — exit 0 passed, 1 any other verdict, 2 bad invocation or input."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "check a candidate kernel against a KernelBench problem: correct, honest, timed"


def _sanitize_tools(text: str) -> tuple[str, ...]:  # the parser stays light: sanitize is imported when used
    from kernelwright.verify.sanitize import tools_argument

    return tools_argument(text)


def add_sanitize_argument(p: argparse.ArgumentParser, what: str) -> None:
    """``--sanitize [TOOLS]`` (verify's and bench's): compute-sanitizer over ``what`` once its trials pass."""
    p.add_argument("--sanitize", nargs="?", const="all", default=None, type=_sanitize_tools, metavar="TOOLS",
                   help=f"once the trials pass, run compute-sanitizer over {what} at reduced sizes: "
                        "memcheck,racecheck,initcheck,synccheck (default all; 'none' turns off the default, which is "
                        "all four for a CUDA C++ candidate on a GPU); each report rejects the candidate")


def add_executed_argument(p: argparse.ArgumentParser) -> None:
    """``--no-executed`` (verify's and bench's): no Nsight Compute profile of a passed candidate's call."""
    p.add_argument("--no-executed", action="store_true",
                   help="on a GPU, skip the profiled call under Nsight Compute that gives a pass its executed "
                        "instruction counts (the instruction section is then the SASS's alone)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("problem", help="KernelBench problem file (class Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="solution file defining class ModelNew (Triton or CUDA C++ via load_inline)")
    p.add_argument("--json", action="store_true", help="print the full verdict as JSON")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="where to run the candidate (default: cuda if present, else cpu with the Triton interpreter)")
    p.add_argument("--seed", type=int, default=None, help="replay the trials of an earlier verdict")
    p.add_argument("--trials", type=int, default=None, help="random-input trials (at least 5; default 5)")
    p.add_argument("--tolerance", choices=("reference", "kernelbench"), default="reference",
                   help="judge against float64 relative to PyTorch's own error (default), or KernelBench's atol/rtol")
    p.add_argument("--tolerance-factor", type=float, default=None,
                   help="allowed multiple of PyTorch's own error in reference mode (default 8)")
    p.add_argument("--no-timing", action="store_true", help="check correctness and integrity only")
    p.add_argument("--no-compile-baseline", action="store_true",
                   help="time eager PyTorch only, not torch.compile (faster)")
    p.add_argument("--allow-library-only", action="store_true",
                   help="accept a candidate that launches no kernel of its own")
    p.add_argument("--allow-tf32", action="store_true", help="accept TF32 math in an fp32 problem")
    p.add_argument("--allow-reduced-precision", action="store_true",
                   help="accept fp16/bf16 math in an fp32 problem (precision findings become notes)")
    p.add_argument("--arch", default=None,
                   help="arch(s) to compile the candidate's Triton kernels for, for the instruction summary "
                        "(comma-separated, e.g. sm_80,sm_90a; default: the GPU's own, or sm_90a without a GPU)")
    p.add_argument("--timeout", type=float, default=None, help="seconds allowed for each child process")
    p.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                   help="check at another value of one of the problem's module-level sizes (repeatable), e.g. "
                        "--size batch_size=16 (without a GPU, a problem too large for the interpreter is "
                        "reduced automatically)")
    p.add_argument("--full-size", action="store_true",
                   help="without a GPU, check at the problem's sizes as written, however slow")
    p.add_argument("--progress", default=None, metavar="FILE",
                   help="append a JSON line to FILE as each step of the protocol starts and ends (where a verify "
                        "that something killed was)")
    add_sanitize_argument(p, "the candidate's forward")
    add_executed_argument(p)
    p.add_argument("--explain", action=_Explain, metavar="CODE",
                   help="print what a finding code means (its class, severity and what to do) and exit")


class _Explain(argparse.Action):
    """``--explain CODE`` answers at once, like ``--version``: no problem or candidate is needed."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        from kernelwright.verify.codes import closest, explain

        try:
            text = explain(str(value))
        except KeyError:
            near = closest(str(value))
            parser.error(f"--explain: no finding code {value!r}"
                         + (f"; the closest: {', '.join(near)}" if near else "; docs/integrity.md lists every code"))
        sys.stdout.write(text + "\n")
        parser.exit(0)


def run(args: argparse.Namespace) -> int:
    from kernelwright.errors import InputError
    from kernelwright.records import Policy
    from kernelwright.verify.records import VerifyOptions, verdict_json
    from kernelwright.verify.report import render
    from kernelwright.verify.verifier import verify

    if args.trials is not None and args.trials < 1:
        raise InputError("--trials must be a positive number (at least 5 random trials are always run)")
    if args.tolerance_factor is not None and args.tolerance_factor <= 0:
        raise InputError(f"--tolerance-factor must be positive (got {args.tolerance_factor:g}); the default is 8")
    if args.timeout is not None and args.timeout <= 0:
        raise InputError(f"--timeout must be a positive number of seconds (got {args.timeout:g})")
    archs = None
    if args.arch:
        from kernelwright.hardware.spec import known_archs

        # checked here, not discovered by crashing the compiler inside the candidate's process
        archs = tuple(known_archs(args.arch))
        if any(a.startswith("gfx") for a in archs):
            raise InputError(f"--arch {args.arch}: the instruction summary covers NVIDIA archs (sm_70 to sm_120a)")
    options = VerifyOptions(
        device=args.device,
        seed=args.seed,
        trials=args.trials,
        tolerance=args.tolerance,
        tolerance_factor=args.tolerance_factor,
        timing=not args.no_timing,
        compile_baseline=not args.no_compile_baseline,
        allow_library_only=args.allow_library_only,
        policy=Policy(allow_tf32=args.allow_tf32, allow_reduced_precision=args.allow_reduced_precision),
        inspect_archs=archs,
        timeout_s=args.timeout,
        size_overrides=_sizes(args.size),
        reduce_on_cpu=not args.full_size,
        progress_file=args.progress,
        sanitize=args.sanitize,
        executed=False if args.no_executed else None,
    )
    verdict = verify(args.problem, args.candidate, options)
    if args.json:
        sys.stdout.write(verdict_json(verdict) + "\n")
    else:
        print(render(verdict))
    return 0 if verdict.passed else 1


def _sizes(pairs: list[str]) -> dict[str, int]:
    from kernelwright.errors import InputError

    sizes: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip() or sizes.get(name.strip(), 0) < 1:
            raise InputError(f"--size {pair}: expected NAME=POSITIVE_INTEGER, e.g. --size batch_size=16")
    return sizes
