"""Export every run under a folder and use each package the way issue 7's user does; print one table row per run.

    python scripts/export_suite.py runs/suite                        # GPU: the variants' real kernels
    TRITON_INTERPRET=1 python scripts/export_suite.py runs/suite     # CPU: the same kernels under the interpreter
    python scripts/export_suite.py runs/suite --problems softmax,matmul --json export-suite.json

For each run folder (one holding ``run.json`` and ``best.py``, as ``kernelwright optimize`` writes): export it as a
package, import it, build the package's module with the reference's ``get_init_inputs()`` and the original module's
``state_dict``, and check, each as its own column:

- ``forward``: the module's output against the reference (the verifier's float64-relative tolerance);
- ``ran``: which variant the dispatcher took (an arch, ``sm_90a_interpreted`` under the interpreter, or
  ``reference`` — the fallback, which is all a CPU without the interpreter can run);
- ``compile``: ``torch.compile(fullgraph=True)`` of the module matches too (a graph break is a failure);
- ``opcheck``: ``torch.library.opcheck`` of the op on the same arguments;
- ``backward``: where the package registered a backward, input and parameter gradients against the reference's.

On the CPU the problem's sizes are reduced to those the run was verified at (``size_overrides`` in its verdict),
except the constructor's (the op is exported for the problem's own ``Model(*get_init_inputs())``), so a suite
exported from CPU runs checks in minutes — big-weight GEMMs under the interpreter take longer. A failing step records its one-line reason and the next step runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def _inputs(reference: Any, device: Any, seed: int) -> list[Any]:
    import torch

    torch.manual_seed(seed)
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in reference.get_inputs()]


def _judge(got: Any, reference_model: Any, inputs: list[Any], device_type: str) -> str | None:
    """None if ``got`` matches the reference under the verifier's rule, else why not."""
    from kernelwright.search.worker import first_mismatch, reference_outputs
    from kernelwright.verify import tensors

    expected, expected64 = reference_outputs(reference_model, inputs)
    return first_mismatch([o.detach().cpu() for o in tensors.flatten_outputs(got)], expected, expected64,
                          roundoff=0.0, device_type=device_type)


def _gradients(fn: Any, module: Any, inputs: list[Any], weights: list[Any]) -> list[Any]:
    import torch

    from kernelwright.verify import tensors

    leaves = [v for v in inputs if isinstance(v, torch.Tensor) and v.requires_grad]
    leaves += [p for p in module.parameters() if p.requires_grad]
    outs = [o for o in tensors.flatten_outputs(fn(*inputs)) if o.is_floating_point()]
    loss = sum((o.float() * w).sum() for o, w in zip(outs, weights))
    return list(torch.autograd.grad(loss, leaves, allow_unused=True))


def check_run(run: Path, out_root: Path, device: Any) -> dict[str, Any]:
    import torch

    from kernelwright.export.api import export_package
    from kernelwright.problem import sizes

    row: dict[str, Any] = {"run": run.name}
    started = time.perf_counter()
    package_dir = out_root / f"kws_{run.name}"
    try:
        result = export_package([run], out=package_dir, force=True)
    except Exception as exc:
        row["export"] = _reason(exc)
        return row
    row.update(export="ok", registration=result.registration, backward=result.backward or "none",
               export_s=round(time.perf_counter() - started, 1))

    sys.path.insert(0, str(out_root))
    try:
        package = importlib.import_module(package_dir.name)
    finally:
        sys.path.remove(str(out_root))
    reference = importlib.import_module(f"{package_dir.name}._reference")
    if device.type == "cpu":  # the run's reduced sizes, except those of the weights: the op is for the problem's
        verdict = json.loads((run / "verdict.json").read_text())  # own Model(*get_init_inputs())
        configured = repr(reference.get_init_inputs())
        for name, value in (verdict.get("size_overrides") or {}).items():
            original = getattr(reference, name)
            sizes.apply(reference, {name: value})
            if repr(reference.get_init_inputs()) != configured:
                sizes.apply(reference, {name: original})
    op = getattr(getattr(torch.ops, result.namespace), result.op)

    torch.manual_seed(0)
    init = reference.get_init_inputs()
    original = reference.Model(*init).to(device).eval()
    module = getattr(package, result.module_class)(*init).to(device).eval()
    module.load_state_dict(original.state_dict())
    inputs = _inputs(reference, device, seed=1)

    def step(name: str, action: Any) -> None:
        try:
            why = action()
            row[name] = "ok" if why is None else why[:160]
        except Exception as exc:
            row[name] = _reason(exc)
            if "-v" in sys.argv:
                traceback.print_exc()

    before = dict(package.dispatch_counts())
    step("forward", lambda: _judge(module(*inputs), original, inputs, device.type))
    after = package.dispatch_counts()
    row["ran"] = ",".join(k for k in after if after[k] != before.get(k, 0)) or "-"

    def compiled() -> str | None:
        torch._dynamo.reset()
        return _judge(torch.compile(module, fullgraph=True)(*inputs), original, inputs, device.type)

    step("compile", compiled)
    state = [t for t in module.state_dict().values()]
    # Under the interpreter the eager op runs the variant on CPU tensors but fake and traced calls take the
    # reference (Inductor cannot compile a Triton kernel for the CPU, and a kernel cannot run on fake tensors), so
    # opcheck's fake-tensor and AOT tests would compare two honest implementations (roundings, output strides: the
    # attention variant returns a [B, S, H, D]-strided view). On a GPU both sides run the variant: all tests run.
    interpreted = os.environ.get("TRITON_INTERPRET") == "1" and device.type == "cpu"
    only = {"test_utils": ("test_schema", "test_autograd_registration")} if interpreted else {}
    step("opcheck", lambda: torch.library.opcheck(op.default, (*inputs, *state), **only) and None)

    if result.backward:
        def backward() -> str | None:
            float_inputs = [v.detach().clone().requires_grad_(v.is_floating_point())
                            if isinstance(v, torch.Tensor) else v for v in inputs]
            torch.manual_seed(2)
            from kernelwright.verify import tensors

            weights = [torch.randn_like(o, dtype=torch.float32)
                       for o in tensors.flatten_outputs(original(*inputs)) if o.is_floating_point()]
            got = _gradients(module, module, float_inputs, weights)
            ref_inputs = [v.detach().clone().requires_grad_(True) if isinstance(v, torch.Tensor)
                          and v.is_floating_point() else v for v in inputs]
            want = _gradients(original, original, ref_inputs, weights)
            for i, (g, w) in enumerate(zip(got, want)):
                if (g is None) != (w is None):
                    return f"gradient {i}: {'none' if g is None else 'a tensor'} where the reference has " \
                           f"{'none' if w is None else 'one'}"
                if g is not None:
                    scale = float(w.abs().max()) or 1.0
                    err = float((g.float() - w.float()).abs().max()) / scale
                    tol = 1e-4 if w.dtype == torch.float32 else 2e-2
                    if err > tol:
                        return f"gradient {i}: max error {err:.2e} of its largest value (tolerance {tol:g})"
            return None

        step("grad", backward)
    row["total_s"] = round(time.perf_counter() - started, 1)
    return row


COLUMNS = ("run", "export", "registration", "ran", "forward", "compile", "opcheck", "backward", "grad", "total_s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", help="a folder of run folders (kernelwright optimize --out …/<problem>)")
    parser.add_argument("--problems", default="", help="comma-separated run folder names (default: all)")
    parser.add_argument("--out", default="", help="where the packages go (default: a temporary folder)")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    parser.add_argument("-v", action="store_true", help="print tracebacks of failing steps")
    args = parser.parse_args(argv)

    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    wanted = {p for p in args.problems.split(",") if p}
    runs = sorted(p for p in Path(args.runs).iterdir() if (p / "run.json").exists() and (p / "best.py").exists()
                  and (not wanted or p.name in wanted))
    if not runs:
        print(f"no run folders (with run.json and best.py) under {args.runs}", file=sys.stderr)
        return 2
    out_root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="kw-export-suite-"))
    out_root.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS), flush=True)
    for run in runs:
        row = check_run(run, out_root, device)
        rows.append(row)
        print("| " + " | ".join(str(row.get(c, "")).replace("|", "/") for c in COLUMNS) + " |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    ok = sum(all(row.get(c, "ok") == "ok" for c in ("export", "forward", "compile", "opcheck", "grad"))
             for row in rows)
    print(f"\n{ok}/{len(rows)} packages passed every check ({device}, torch {torch.__version__})")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
