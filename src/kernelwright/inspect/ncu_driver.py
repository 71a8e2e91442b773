"""The program ``kernelwright inspect --executed`` runs under Nsight Compute (on a GPU machine only):

    python -m kernelwright.inspect.ncu_driver CANDIDATE.py [--problem PROBLEM.py] [--iters 2]

With a problem (KernelBench form: ``Model``, ``get_inputs``, ``get_init_inputs``) it builds ``ModelNew`` from the
candidate with the problem's init inputs, moves it and fresh inputs to the GPU and calls it ``--iters`` times; without
one it runs the candidate as a script. It runs as its own process with credentials removed from the environment (the
candidate is untrusted code), and prints nothing of its own so that ncu's CSV stays parseable.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path
from types import ModuleType

from kernelwright.runtime.modules import load_module


def _load(path: Path, name: str) -> ModuleType:
    try:
        return load_module(name, path)
    except ImportError as exc:
        raise SystemExit(f"cannot import {path}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.inspect.ncu_driver")
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--problem", type=Path)
    parser.add_argument("--iters", type=int, default=2)
    args = parser.parse_args(argv)
    if args.problem is None:
        sys.argv = [str(args.candidate)]
        runpy.run_path(str(args.candidate), run_name="__main__")
        return 0

    import torch

    torch.manual_seed(0)
    problem = _load(args.problem, "kernelwright_problem")
    candidate = _load(args.candidate, "kernelwright_candidate")
    init_inputs = problem.get_init_inputs() if hasattr(problem, "get_init_inputs") else []
    model = candidate.ModelNew(*init_inputs).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    with torch.no_grad():
        for _ in range(max(1, args.iters)):
            model(*inputs)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
