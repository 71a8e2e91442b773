"""``kernelwright export`` — package verified runs as a PyTorch op.

    kernelwright export runs/rmsnorm --name rmsnorm --out my_kernels/          # import my_kernels
    kernelwright export runs/rmsnorm_h100 runs/rmsnorm_a100 --out my_kernels --force   # one variant per arch
    kernelwright export --list my_kernels                                       # which variant runs where

Exit 0 when the package was written (or listed), 2 for bad input: one line on stderr, nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelwright.errors import InputError

HELP = "package verified runs as a PyTorch op: torch.library registration, torch.compile, per-arch variants"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="*", type=Path, metavar="RUN",
                   help="run folders of kernelwright optimize (one per arch and precision policy)")
    p.add_argument("--out", type=Path, help="the package directory to write; its last part is the package name "
                                            "(op namespace kernelwright_<package>)")
    p.add_argument("--name", help="the op's name (default: the problem's name)")
    p.add_argument("--force", action="store_true", help="replace an existing exported package at --out")
    p.add_argument("--list", type=Path, metavar="PACKAGE", dest="list_package",
                   help="print an exported package's variants: which runs where")
    p.add_argument("--json", action="store_true", help="with --list: print variants.json")
    p.add_argument("--no-trace-check", action="store_true",
                   help="skip tracing each Triton variant with fake CUDA tensors (then triton_op is assumed)")


def run(args: argparse.Namespace) -> int:
    if args.list_package is not None:
        return _list(args.list_package, as_json=args.json)
    if not args.runs:
        raise InputError("give one or more run folders to export (or --list PACKAGE)")
    if args.out is None:
        raise InputError("give --out DIR, the package directory to write (e.g. --out my_kernels)")
    from kernelwright.export.api import export_package

    result = export_package(args.runs, out=args.out, name=args.name, force=args.force, isolate=True,
                            trace=not args.no_trace_check)
    print(f"wrote {result.path}/  (import {result.package})")
    print(f"op        torch.ops.{result.namespace}.{result.op}  ({result.registration}: "
          f"{result.registration_reason})")
    print(f"module    {result.package}.{result.module_class}")
    print(f"variants  {', '.join(result.variants)}; the reference elsewhere")
    print("backward  " + {"generated": "generated kernels where a variant's run has them (optimize --backward), "
                                       "else through the reference (torch.func.vjp)",
                          "reference-vjp": "recomputed through the reference (torch.func.vjp)",
                          None: "none (the reference is not differentiable)"}[result.backward])
    print(f"see       {result.path}/README.md; kernelwright export --list {result.path}", file=sys.stderr)
    return 0


def _list(path: Path, *, as_json: bool) -> int:
    if as_json:
        from kernelwright.export.package import read_variants_json

        print(json.dumps(read_variants_json(path), indent=1))
        return 0
    from kernelwright.export.api import list_package

    print(list_package(path))
    return 0
