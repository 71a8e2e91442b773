"""Issue 2's acceptance run on a GPU: `kernelwright verify` against an independent `triton.testing.do_bench`.

For each (problem, candidate) case it

1. runs ``kernelwright verify --json`` (the whole protocol: isolated children, trials, timing, baselines);
2. measures the same candidate, eager PyTorch and torch.compile independently with ``triton.testing.do_bench``
   (median; its own L2 flush; one input set) in a fresh process;
3. prints one table: verify's medians, do_bench's medians, their ratio, and both sets of speedups.

Usage (on the GPU machine): ``python scripts/gpu_validate.py --out DIR [--cases softmax,matmul] [--no-compile]``.
Everything is written under DIR (verdicts, do_bench JSON); the table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "softmax": ("problems/softmax.py", "examples/softmax_triton.py"),
    "matmul": ("problems/matmul.py", "examples/matmul_triton.py"),
    "vector_add": ("problems/vector_add.py", "examples/vector_add_triton.py"),
    "layernorm": ("problems/layernorm.py", "examples/layernorm_triton.py"),
    "gelu_mul": ("problems/gelu_mul.py", "examples/gelu_mul_triton.py"),
    "vector_add_cuda": ("problems/vector_add.py", "examples/vector_add_cuda.py"),
}

_DO_BENCH = r"""
import importlib.util, json, sys, torch, triton
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); sys.modules[name] = mod; spec.loader.exec_module(mod); return mod
problem, candidate, compile_too = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
p = load(problem, "p"); c = load(candidate, "c")
torch.manual_seed(0); init = p.get_init_inputs() if hasattr(p, "get_init_inputs") else []
torch.manual_seed(0); ref = p.Model(*init).cuda()
torch.manual_seed(0); new = c.ModelNew(*init).cuda()
try: new.load_state_dict(ref.state_dict())
except Exception: pass
torch.manual_seed(1); inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in p.get_inputs()]
def bench(model):
    def fn():
        with torch.no_grad(): model(*inputs)
    fn(); torch.cuda.synchronize()
    return triton.testing.do_bench(fn, warmup=100, rep=600, return_mode="median")
def report(name, value):
    print("DOBENCH " + json.dumps({name: value}), flush=True)
report("candidate", bench(new))
report("eager", bench(ref))
if compile_too:
    report("compile", bench(torch.compile(ref)))
    torch._dynamo.reset()
    report("compile_max_autotune", bench(torch.compile(ref, mode="max-autotune-no-cudagraphs")))
"""


def _run_verify(name: str, problem: str, candidate: str, out: Path, compile_baseline: bool) -> dict:
    cmd = [sys.executable, "-m", "kernelwright", "verify", "--json", "--device", "cuda", problem, candidate]
    if not compile_baseline:
        cmd.append("--no-compile-baseline")
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    (out / f"verify-{name}.stderr").write_text(proc.stderr)
    try:
        verdict = json.loads(proc.stdout)
    except ValueError:
        verdict = {"status": f"no verdict (exit {proc.returncode})", "message": proc.stderr.strip()[-300:]}
    verdict["_wall_s"] = time.time() - start
    (out / f"verdict-{name}.json").write_text(json.dumps(verdict, indent=1))
    return verdict


def _run_do_bench(name: str, problem: str, candidate: str, out: Path, compile_baseline: bool) -> dict:
    log = out / f"dobench-{name}.log"
    with open(log, "w") as sink:  # streamed, so a run cut short keeps what it measured
        subprocess.run([sys.executable, "-c", _DO_BENCH, problem, candidate, "1" if compile_baseline else "0"],
                       cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, text=True)
    found: dict = {}
    for line in log.read_text().splitlines():
        if line.startswith("DOBENCH "):
            found.update(json.loads(line[len("DOBENCH "):]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-validate-out")))
    parser.add_argument("--cases", default="softmax,matmul")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baselines")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    compile_baseline = not args.no_compile
    print("case        variant               verify ms  do_bench ms  ratio   verify x  do_bench x  %floor (verify/do_bench)")
    for name in args.cases.split(","):
        problem, candidate = CASES[name]
        verdict = _run_verify(name, problem, candidate, args.out, compile_baseline)
        bench = _run_do_bench(name, problem, candidate, args.out, compile_baseline)
        print(f"[{name}] {verdict.get('status')} — {verdict.get('message', '')[:160]} ({verdict['_wall_s']:.0f} s)",
              flush=True)
        _print_rows(name, verdict, bench)
    return 0


def _print_rows(name: str, verdict: dict, bench: dict) -> None:
    timing = verdict.get("timing") or {}
    cand_v = (timing.get("candidate") or {}).get("median_ms")
    cand_b = bench.get("candidate")
    for variant in ("candidate", "eager", "compile", "compile_max_autotune"):
        v = (timing.get(variant) or {}).get("median_ms")
        b = bench.get(variant)
        if v is None and b is None:
            continue
        ratio = f"{v / b:.3f}" if v and b else "-"
        sv = f"{v / cand_v:.2f}" if v and cand_v and variant != "candidate" else ""
        sb = f"{b / cand_b:.2f}" if b and cand_b and variant != "candidate" else ""
        floor = ""
        if variant == "candidate" and verdict.get("percent_of_floor"):
            # The same achievable floor over do_bench's median: the two "% of floor" figures must agree too.
            achievable = (verdict.get("roofline") or {}).get("achievable_floor_ms")
            independent = f"{100 * achievable / b:.0f}" if achievable and b else "-"
            floor = f"{verdict['percent_of_floor']:.0f} / {independent}"
        vs = f"{v:.4f}" if v else "-"
        bs = f"{b:.4f}" if b else "-"
        print(f"{name:<11} {variant:<21} {vs:>9}  {bs:>11}  {ratio:>5}  {sv:>8}  {sb:>10}  {floor:>6}")
    roof = verdict.get("roofline") or {}
    print(f"{'':<11} status={verdict.get('status')} floor={roof.get('achievable_floor_ms')} "
          f"physical={roof.get('physical_floor_ms')} kernels="
          f"{[k['name'][:30] + ':' + k['origin'] for k in verdict.get('kernels', [])][:3]}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
