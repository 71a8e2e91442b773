"""What torch.compile generates for a problem, for comparison with our own kernels (issue 16: where Inductor is
faster, its Triton kernel shows the tiling and launch it chose). Runs on a GPU machine:

    python3 scripts/inductor_code.py PROBLEM.py [PROBLEM.py ...] [--mode max-autotune-no-cudagraphs] [--out DIR]

Per problem, writes DIR/NAME.inductor.py: the output code Inductor compiled (every Triton kernel with its launch
grid and, under max-autotune, the configuration its autotuner kept), and DIR/NAME.inductor.txt: one line a kernel
launched with its device time (torch.profiler), so the kernels can be matched with an Nsight Compute report.
Not a benchmark: `kernelwright bench` measures the baselines side by side.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"kw_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _one(path: Path, mode: str, out: Path) -> None:
    import torch
    from torch._inductor.utils import run_and_get_code

    problem = _load(path)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    torch._dynamo.reset()
    compiled = torch.compile(model, mode=mode)
    with torch.no_grad():
        _, codes = run_and_get_code(compiled, *inputs)
        for _ in range(3):
            compiled(*inputs)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                compiled(*inputs)
            torch.cuda.synchronize()
    (out / f"{path.stem}.inductor.py").write_text("\n\n# ---- next graph ----\n\n".join(codes))
    lines = [f"{e.key}  calls {e.count}  device us/call {e.device_time_total / max(e.count, 1):.1f}"
             for e in prof.key_averages() if e.device_time_total > 0]
    (out / f"{path.stem}.inductor.txt").write_text(f"{path.name} mode={mode}\n" + "\n".join(lines) + "\n")
    print(f"{path.name}: {len(codes)} graph(s); " + "; ".join(lines), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--mode", default="default", help="torch.compile mode (default, max-autotune-no-cudagraphs)")
    parser.add_argument("--out", type=Path, default=Path("inductor-code"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in args.problems:
        try:
            _one(path, None if args.mode == "default" else args.mode, args.out)
        except Exception as exc:  # one problem's failure is its line, not the end of the list
            failed += 1
            print(f"{path.name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
