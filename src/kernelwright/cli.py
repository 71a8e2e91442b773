"""The ``kernelwright`` command line.

Each subcommand lives beside its role (``kernelwright/<role>/cli.py``) and exposes ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; this module only dispatches, so ``kernelwright --help`` imports
no torch. Exit codes: 0 passed / success, 1 any other verdict, 2 bad invocation or unreadable input (one line on
stderr, no traceback unless ``--verbose``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

from kernelwright.errors import KernelwrightError
from kernelwright.version import __version__

# subcommand -> module that implements it (imported only when chosen)
COMMANDS: dict[str, str] = {
    "optimize": "kernelwright.search.cli",
    "generate": "kernelwright.search.generate_cli",
    "verify": "kernelwright.verify.cli",
    "inspect": "kernelwright.verify.inspect_cli",
    "hw": "kernelwright.hardware.cli",
    "runs": "kernelwright.search.runs_cli",
    "export": "kernelwright.export.cli",
    "bench": "kernelwright.bench.cli",
    "config": "kernelwright.config_cli",
    "model": "kernelwright.costmodel.cli",
}

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that says where to look, not a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _subcommand_help(name: str) -> str:
    # Reading HELP needs the module; the modules import nothing heavy at import time.
    try:
        return importlib.import_module(COMMANDS[name]).HELP
    except ImportError:
        return "(unavailable in this installation)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernelwright",
        description="Turn a PyTorch operator into a GPU kernel that is proven correct, proven faster, "
        "and proven to run the instructions it claims.",
    )
    parser.add_argument("--version", action="version", version=f"kernelwright {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        help_text = _subcommand_help(name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="log progress and show tracebacks")
        with contextlib.suppress(ImportError):
            importlib.import_module(COMMANDS[name]).add_arguments(p)
    return parser


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _bytecode_cache() -> None:
    """Before torch is imported: bytecode in kernelwright's cache where the installation has none (bytecode.py)."""
    from kernelwright.config import config
    from kernelwright.isolation import bytecode

    bytecode.enable(config.cache_dir)


# The commands whose every run starts jobs (a verify's reference and candidate, a bench's, a search's): their zygote
# starts first. Not export or inspect: many of their runs start none (a listing, a cubin), and a zygote that no job
# uses only takes a core from the command for its 3-4 s of imports.
_JOB_COMMANDS = ("optimize", "generate", "verify", "bench")


def _gpu_visible() -> bool:
    """Whether this process would see an NVIDIA GPU, asked without importing torch (the driver's files)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    with contextlib.suppress(OSError):
        return bool(os.listdir("/proc/driver/nvidia/gpus"))
    return False


def _warm_jobs_early(args: argparse.Namespace) -> None:
    """Start the jobs' zygote before this process imports torch, so that the two imports run side by side: the
    first job (a verify's reference) otherwise waits for the zygote's imports after the parent's own — its phase
    took 12-13 s forked against 7.6 s fresh on an H100 (run 64), 3.7 s against 0.3 s warm on 2 CPU cores."""
    if args.command not in _JOB_COMMANDS:
        return
    device = getattr(args, "device", None)
    if device not in ("cpu", "cuda"):
        device = "cuda" if _gpu_visible() else "cpu"
    from kernelwright.isolation.process import warm_zygote

    warm_zygote(device)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    signal.signal(signal.SIGTERM, _terminated)  # cleanup (children, scratch folders) as for Ctrl-C
    try:
        _bytecode_cache()
        _warm_jobs_early(args)
        module = importlib.import_module(COMMANDS[args.command])
        return int(module.run(args))
    except KernelwrightError as exc:
        if args.verbose:
            raise
        print(f"kernelwright {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        from kernelwright.isolation.process import kill_running_children

        kill_running_children(stopping=True)  # verifies in worker threads never saw the interrupt
        print(f"kernelwright {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kernelwright ... | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # an internal defect: one line, the traceback only with --verbose
        if args.verbose:
            raise
        print(
            f"kernelwright {args.command}: internal error: {type(exc).__name__}: {exc} "
            "(rerun with --verbose for the traceback, and please report it)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
