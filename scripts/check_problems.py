"""Check the KernelBench-format problems under problems/ (and examples/problems/) on the CPU.

For every problem file: import it, shrink its integer size globals (every int global > 64 becomes 64, unless
SIZE_OVERRIDES says otherwise; files under examples/problems are already CPU-sized and keep their sizes), build
the model and inputs under a fixed seed, and run forward in float64, float32 and the problem's native dtype.
A problem passes when

- it has a docstring, Model, get_inputs and get_init_inputs, and get_inputs returns CPU tensors;
- inputs and outputs are deterministic given the seed;
- the output is finite, not ~0 and not near-constant (std/rms >= 0.01);
- no decoy (zeros, the output's mean, a copy of a same-shaped input) passes KernelBench's tolerance
  (atol = rtol = 1e-4 for fp32, 1e-2 for half types) against the float64 output, nor comes within it on
  more than 90% of the elements;
- the native-dtype output, where the CPU can run it, is within a loose bound of the float64 output.

Usage: python scripts/check_problems.py [--full] [--only NAME ...] [DIR_OR_FILE ...]
  --full keeps the real sizes (float32 only; slow for the GEMM-heavy problems).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATHS = [ROOT / "problems", ROOT / "examples" / "problems"]
SMALL = 64
SEED = 1234
# Per-file shrink values where plain "64" is not wanted (e.g. to keep a scan or reduction long enough to matter).
SIZE_OVERRIDES: dict[str, dict[str, int]] = {
    "cumprod.py": {"dim": 1000},
    "cumsum.py": {"dim": 1000},
    "cumsum_dim1.py": {"seq_len": 1000},
    "softmax.py": {"dim": 1000},
    "log_softmax_bf16.py": {"vocab": 1000},
    "cross_entropy.py": {"vocab": 1000},
    "argmax_lastdim.py": {"vocab": 1000},
    "vector_add.py": {"n": 100_003},
    "attention_causal_fp16.py": {"seq_len": 256},
    "attention_sdpa_bf16.py": {"seq_len": 256},
    "transformer_attention_fp16.py": {"seq_len": 256},
}
KB_TOL = {torch.float32: 1e-4, torch.float64: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}
# Native-dtype output vs float64, as max |diff| / max |ref|: a sanity bound (catches overflow), not a tolerance.
NATIVE_BOUND = {torch.float32: 1e-3, torch.float16: 3e-2, torch.bfloat16: 6e-2}
MIN_RMS = 1e-6
MIN_SPREAD = 1e-2  # std / rms of the output
MAX_DECOY_SHARE = 0.9  # a decoy within tolerance on more than this share of the elements makes a weak problem


@dataclass
class Report:
    name: str
    dtype: str = "?"
    shape: str = "?"
    rms: float = math.nan
    spread: float = math.nan
    decoy: str = "-"
    native_err: str = "-"
    fp32_err: str = "-"
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"problem_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shrink(module: ModuleType, path: Path) -> dict[str, int]:
    overrides = SIZE_OVERRIDES.get(path.name, {})
    changed = {}
    for name, value in list(vars(module).items()):
        if name.startswith("_") or type(value) is not int:
            continue
        if name in overrides:
            changed[name] = overrides[name]
        elif value > SMALL:
            changed[name] = SMALL
    for name, value in changed.items():
        setattr(module, name, value)
    return changed


def build(module: ModuleType, dtype: torch.dtype | None) -> tuple[torch.nn.Module, list]:
    """Model and inputs under the fixed seed; dtype=None keeps the problem's own dtypes."""
    torch.manual_seed(SEED)
    model = module.Model(*module.get_init_inputs())
    torch.manual_seed(SEED)
    inputs = module.get_inputs()
    if dtype is not None:
        model = model.to(dtype)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    return model.eval(), inputs


def native_dtype(model: torch.nn.Module, inputs: list) -> torch.dtype:
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.parameters())
    floats = [t.dtype for t in tensors if t.is_floating_point()]
    return floats[0] if floats else torch.float32


def run(model: torch.nn.Module, inputs: list) -> torch.Tensor:
    with torch.no_grad():
        out = model(*inputs)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {type(out).__name__}, expected a Tensor")
    return out


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    if not out.is_floating_point():
        return float((out != ref).double().mean())  # share of differing elements
    scale = ref.double().abs().max().clamp_min(1e-30)
    return float((out.double() - ref.double()).abs().max() / scale)


def decoy_report(ref: torch.Tensor, inputs: list, tol: float) -> tuple[str, list[str]]:
    """Worst decoy as 'name:share-of-elements-within-tol'; a problem when a decoy passes outright."""
    ref64 = ref.double()
    decoys = {"zeros": torch.zeros_like(ref64), "mean": torch.full_like(ref64, float(ref64.mean()))}
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.shape == ref.shape:
            decoys[f"input{i}"] = x.double()
    worst_name, worst_share, problems = "", -1.0, []
    for name, decoy in decoys.items():
        close = (decoy - ref64).abs() <= tol + tol * ref64.abs()
        share = float(close.double().mean())
        if bool(close.all()):
            problems.append(f"decoy {name} passes atol=rtol={tol:g}")
        elif share > MAX_DECOY_SHARE:
            problems.append(f"decoy {name} within atol=rtol={tol:g} on {share:.0%} of the output")
        if share > worst_share:
            worst_name, worst_share = name, share
    return f"{worst_name}:{worst_share:.2f}", problems


def check(path: Path, full: bool) -> Report:
    report = Report(name=str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path))
    start = time.perf_counter()
    try:
        module = load_module(path)
        for attr in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(module, attr):
                report.problems.append(f"missing {attr}")
        if not (module.__doc__ or "").strip():
            report.problems.append("no module docstring")
        if report.problems:
            return report
        cpu_sized = path.parent.name == "problems" and path.parent.parent.name == "examples"
        if not full and not cpu_sized:
            shrink(module, path)
        model, inputs = build(module, None)
        dtype = native_dtype(model, inputs)
        report.dtype = str(dtype).removeprefix("torch.")
        if any(isinstance(x, torch.Tensor) and x.device.type != "cpu" for x in inputs):
            report.problems.append("get_inputs returned a non-CPU tensor")
        _, inputs_again = build(module, None)
        if not all(torch.equal(a, b) for a, b in zip(inputs, inputs_again) if isinstance(a, torch.Tensor)):
            report.problems.append("inputs not deterministic under the seed")

        ref_dtype = torch.float32 if full else torch.float64
        ref_model, ref_inputs = build(module, ref_dtype)
        ref = run(ref_model, ref_inputs)
        if not torch.equal(ref, run(ref_model, ref_inputs)):
            report.problems.append("forward not deterministic")
        report.shape = "x".join(map(str, ref.shape)) or "scalar"
        ref_f = ref.double()
        if not bool(torch.isfinite(ref_f).all()):
            report.problems.append("non-finite output")
        report.rms = float(ref_f.pow(2).mean().sqrt())
        report.spread = float(ref_f.std() / max(report.rms, 1e-30)) if ref.numel() > 1 else 0.0
        if report.rms < MIN_RMS:
            report.problems.append(f"output ~0 (rms {report.rms:.2g})")
        if report.spread < MIN_SPREAD:
            report.problems.append(f"output near-constant (std/rms {report.spread:.2g})")
        report.decoy, decoy_problems = decoy_report(ref, ref_inputs, KB_TOL[dtype])
        report.problems += decoy_problems

        if not full:
            fp32_model, fp32_inputs = build(module, torch.float32)
            fp32_err = rel_err(run(fp32_model, fp32_inputs), ref)
            report.fp32_err = f"{fp32_err:.1e}"
            if fp32_err > NATIVE_BOUND[torch.float32]:
                report.problems.append(f"fp32 vs fp64 error {fp32_err:.2g}")
            if dtype != torch.float32:
                try:
                    native = run(model, inputs)
                except (RuntimeError, NotImplementedError) as error:
                    report.native_err = f"n/a ({str(error).splitlines()[0][:40]})"
                else:
                    if native.dtype != ref.dtype and native.is_floating_point() and native.dtype != dtype:
                        report.problems.append(f"native output dtype {native.dtype}, expected {dtype}")
                    err = rel_err(native, ref)
                    report.native_err = f"{err:.1e}"
                    if not bool(torch.isfinite(native.double()).all()):
                        report.problems.append("native output not finite")
                    elif err > NATIVE_BOUND[dtype]:
                        report.problems.append(f"native vs fp64 error {err:.2g}")
    except Exception as error:  # a broken problem is a row in the table, not a crash of the checker
        report.problems.append(f"{type(error).__name__}: {error}")
    finally:
        report.seconds = time.perf_counter() - start
    return report


def collect(paths: list[Path], only: list[str]) -> list[Path]:
    files = []
    for path in paths:
        files += sorted(path.glob("*.py")) if path.is_dir() else [path]
    if only:
        files = [f for f in files if f.stem in only or f.name in only]
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--full", action="store_true", help="keep real sizes (float32 only)")
    parser.add_argument("--only", nargs="*", default=[], help="problem names to check")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    files = collect([p.resolve() for p in args.paths] or DEFAULT_PATHS, args.only)
    header = f"{'problem':42} {'dtype':8} {'out shape':16} {'rms':>8} {'std/rms':>7} {'worst decoy':>13} "
    header += f"{'native err':>10} {'fp32 err':>8} {'s':>5}  status"
    print(header)
    print("-" * len(header))
    failures = 0
    for path in files:
        r = check(path, args.full)
        failures += not r.ok
        status = "ok" if r.ok else "FAIL: " + "; ".join(r.problems)
        print(
            f"{r.name:42} {r.dtype:8} {r.shape:16} {r.rms:8.3g} {r.spread:7.3f} {r.decoy:>13} "
            f"{r.native_err:>10} {r.fp32_err:>8} {r.seconds:5.1f}  {status}",
            flush=True,
        )
    print(f"\n{len(files) - failures}/{len(files)} problems pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
