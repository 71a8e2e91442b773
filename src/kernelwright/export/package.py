"""Writing the exported package: ``__init__.py`` (the op's registration), ``README.md``, ``variants.json``.

Everything rendered here is plain source a person can read; the generic machinery is the ``_runtime/`` folder, a
verbatim copy of :mod:`kernelwright.runtime` (:data:`RUNTIME_FOLDER`).
"""

from __future__ import annotations

import datetime as _dt
import json
import keyword
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.export.runs import RunVariant
from kernelwright.runtime.dispatch import PRECISION_LABELS
from kernelwright.runtime.op import runs_on_text
from kernelwright.version import __version__

FORMAT_VERSION = 1
# Where the package holds its verbatim copy of kernelwright.runtime (every .py file of that folder): the folder's
# files import each other relatively, so they keep their names and resolve in both places.
RUNTIME_FOLDER = "_runtime"
_TYPES = {"tensor": "torch.Tensor", "int": "int", "float": "float", "bool": "bool"}


@dataclass(frozen=True, kw_only=True)
class PackagePlan:
    """What the package holds: names, the signature (from the probe), the variants, how the op is registered."""

    package: str
    op: str
    runs: tuple[RunVariant, ...]
    probe: dict[str, Any]
    registration: str  # "triton_op" or "custom_op"
    registration_reason: str

    @property
    def namespace(self) -> str:
        return f"kernelwright_{self.package}"

    @property
    def module_class(self) -> str:
        return camel_case(self.op)

    @property
    def inputs(self) -> list[dict[str, Any]]:
        return self.probe["inputs"]

    @property
    def state(self) -> list[dict[str, Any]]:
        return self.probe["state"]

    @property
    def outputs(self) -> dict[str, Any]:
        return self.probe["outputs"]

    @property
    def differentiable(self) -> bool:
        return bool(self.probe["differentiable"])

    @property
    def backward_method(self) -> str | None:
        """``generated`` when some variant has the generated backward kernels of its run (``optimize --backward``),
        ``reference-vjp`` when every gradient recomputes through the reference, None without a backward."""
        if not self.differentiable:
            return None
        return "generated" if any(run.backward for run in self.runs) else "reference-vjp"

    @property
    def problem_name(self) -> str:
        return self.runs[0].problem_name

    def state_args(self) -> list[str]:
        """The op's argument names for the parameters and buffers (``norm.weight`` -> ``norm_weight``)."""
        from kernelwright.problem.signature import unique_identifiers

        taken = {i["name"] for i in self.inputs} | {"needs", "self"}
        return unique_identifiers([s["key"].replace(".", "_") for s in self.state], taken)

    def arg_names(self) -> list[str]:
        return [i["name"] for i in self.inputs] + self.state_args()


def camel_case(name: str) -> str:
    """``rms_norm`` -> ``RmsNorm``; ``softmax`` -> ``Softmax``."""
    parts = [p for p in re.split(r"_+", name) if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) or "Op"


def is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and name.isascii()


# ------------------------------------------------------------------------------------------------ variants.json


def variants_json(plan: PackagePlan) -> dict[str, Any]:
    state_args = plan.state_args()
    return {
        "kind": "kernelwright-export",
        "version": FORMAT_VERSION,
        "package": plan.package,
        "namespace": plan.namespace,
        "op": plan.op,
        "module_class": plan.module_class,
        "registration": plan.registration,
        "registration_reason": plan.registration_reason,
        "backward": ({"method": plan.backward_method, "description": BACKWARD_DESCRIPTIONS[plan.backward_method]}
                     if plan.backward_method else None),
        "problem": {"name": plan.problem_name, "sha256": plan.runs[0].problem_sha256, "file": "_reference.py",
                    "init_inputs": plan.probe.get("init_inputs")},
        "mode_dependent": bool(plan.probe.get("mode_dependent")),
        "inputs": plan.inputs,
        "state": [{**s, "arg": arg} for s, arg in zip(plan.state, state_args)],
        "outputs": plan.outputs,
        "variants": [_variant_json(run, plan.probe["variants"].get(run.id, {})) for run in plan.runs],
        "exported_by": f"kernelwright {__version__}",
        "exported_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


BACKWARD_DESCRIPTIONS = {
    "generated": "the chosen variant's generated backward kernels (its run's optimize --backward: the backward "
                 "written as a problem, its kernels from the template library, verified against float64); "
                 "recomputed through the reference with torch.func.vjp where a variant has none",
    "reference-vjp": "recomputed through the reference with torch.func.vjp (no variant has a generated backward: "
                     "optimize --backward writes one)",
}


def _variant_json(run: RunVariant, probed: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": run.id,
        "arch": run.arch,
        "capability": list(run.capability),
        "runs_on": runs_on_text(run.arch),
        "language": run.language,
        "precision": run.precision,
        "file": f"_variants/{run.id}.py",
        "kernels": list(run.kernels),
        "state_map": probed.get("state_map"),
        "state_note": probed.get("state_note"),
        "trace": probed.get("trace"),
        "toolchain": run.toolchain,
        "backward": ({"file": f"_variants/{run.id}_backward.py", "gradients": list(run.backward.gradients),
                      "verdict": run.backward.verdict} if run.backward else None),
        "backward_note": run.backward_note or (None if run.backward else
                                               "no generated backward (optimize without --backward)"),
        "source": {"run": str(run.path), "generator": run.generator, "run_id": run.run_id,
                   "best_sha256": run.source_sha256, "device": run.device, "device_name": run.device_name,
                   "timed": run.timed},
        "verdict": run.verdict,
    }


# ------------------------------------------------------------------------------------------------ __init__.py


def render_init(plan: PackagePlan) -> str:
    ns, op, cls = plan.namespace, plan.op, plan.module_class
    args = plan.arg_names()
    params = [f"{name}: {_TYPES[spec['kind']]}" for name, spec in zip(args, plan.inputs)]
    params += [f"{name}: torch.Tensor" for name in plan.state_args()]
    call_args = ", ".join(args)
    returns = _returns(plan.outputs)
    variant_ids = ", ".join(r.id for r in plan.runs)
    backward_line = {"generated": "backward: the variant's generated kernels (else the reference's, torch.func.vjp)",
                     "reference-vjp": "backward recomputed through the reference (torch.func.vjp)",
                     None: "no backward (the reference is not differentiable)"}[plan.backward_method]
    lines = [
        f'"""{op} — a PyTorch op exported by kernelwright {__version__} from {plan.problem_name}.py.',
        "",
        f"``import {plan.package}`` registers ``torch.ops.{ns}.{op}``:",
        "",
        f"    {op}({', '.join(args)}) -> {_returns_text(plan.outputs)}",
        "",
        "the forward of the problem's ``Model``: its inputs, then its parameters and buffers in ``state_dict`` order.",
        f"``{cls}`` is that ``Model`` (same constructor, same parameters) with its forward routed through the op.",
        f"Variants: {variant_ids}; the reference elsewhere (``variants()``, README.md). Registered with",
        f"torch.library.{plan.registration}; {backward_line}.",
        '"""',
        "",
        "import functools",
        "from pathlib import Path",
        "from typing import Optional",
        "",
        "import torch",
        "",
        "from . import _reference",
        "from ._runtime import OpRuntime",
        "",
        f'__all__ = ["{cls}", "{op}", "variants", "variant_for", "describe"]',
        "",
        "_runtime = OpRuntime(package=__name__, root=Path(__file__).resolve().parent)",
        "",
        "",
    ]
    if plan.registration == "triton_op":
        lines += [
            "# triton_op: torch.compile traces this body, so Inductor sees the chosen variant's Triton kernels",
            "# (each launch goes through torch.library.wrap_triton); the body on fake tensors is the fake impl.",
            f'@torch.library.triton_op("{ns}::{op}", mutates_args=())',
            *_def(op, params, returns),
            f"    return _runtime.forward({call_args})",
            "",
        ]
    else:
        lines += [
            f"# custom_op: {plan.registration_reason}",
            f'@torch.library.custom_op("{ns}::{op}", mutates_args=())',
            *_def(op, params, returns),
            f"    return _runtime.forward({call_args})",
            "",
            "",
            f"@{op}.register_fake",
            f"def _({call_args}):",
            "    # shapes and dtypes: the reference, run on the fake tensors",
            f"    return _runtime.forward_fake({call_args})",
            "",
        ]
    if plan.differentiable:
        lines += _backward_registration(plan, params, call_args)
    forward_params = ", ".join(f"{i['name']}: {_TYPES[i['kind']]}" for i in plan.inputs)
    op_args = ", ".join([i["name"] for i in plan.inputs] + [_state_expr(s["key"]) for s in plan.state])
    lines += [
        "",
        f"class {cls}(_reference.Model):",
        f'    """{plan.problem_name}.py\'s ``Model`` — same constructor, parameters and ``state_dict`` keys (so',
        "    ``load_state_dict`` from the original module works) — whose forward calls the op",
        f"    ``torch.ops.{ns}.{op}``",
        "    when built as the problem builds it (``get_init_inputs()``); built with other arguments it is another",
        '    operator, which runs the reference (with a warning)."""',
        "",
        "    @functools.wraps(_reference.Model.__init__)",
        "    def __init__(self, *args, **kwargs):",
        "        super().__init__(*args, **kwargs)",
        "        self._kw_exported_configuration = _runtime.same_configuration(args, kwargs)",
        "",
        f"    def forward(self{', ' if forward_params else ''}{forward_params}) -> {returns}:",
        "        # the reference when built otherwise, or where the op would not do what Model does in this mode",
        "        if not self._kw_exported_configuration or _runtime.module_runs_reference(self.training):",
        f"            return super().forward({', '.join(i['name'] for i in plan.inputs)})",
        f"        return torch.ops.{ns}.{op}({op_args})",
        "",
        "",
        "def variants() -> list[dict]:",
        '    """Every variant: arch, where it runs, precision, source run and verdict (from variants.json)."""',
        "    return _runtime.variants()",
        "",
        "",
        "def variant_for(device=None, *, capability=None, precision=None) -> str:",
        '    """The variant a call on ``device`` runs — or on a GPU of compute ``capability``, e.g. ``(8, 6)``,',
        '    present or not — as its id, or ``"reference"``."""',
        "    return _runtime.variant_for(device, capability=capability, precision=precision)",
        "",
        "",
        "def describe() -> str:",
        '    """The variants as a table (what ``kernelwright export --list`` prints)."""',
        "    return _runtime.describe()",
        "",
        "",
        "assume_capability = _runtime.assume_capability  # with assume_capability((9, 0)): choose as on that GPU",
        "dispatch_counts = _runtime.dispatch_counts  # eager calls per implementation in this process",
        "",
    ]
    return "\n".join(lines)


def _backward_registration(plan: PackagePlan, params: list[str], call_args: str) -> list[str]:
    """The ``__init__.py`` lines that register the op's backward as an op of its own and as its autograd."""
    ns, op = plan.namespace, plan.op
    grads = [f"grad_{i}" for i in range(len(plan.outputs["items"]))]
    grad_params = [f"{g}: Optional[torch.Tensor]" for g in grads]
    tensor_list = f"[{call_args}]"
    return [
        "",
        "# The backward: the chosen variant's generated kernels where it has them, else torch.func.vjp of the",
        "# reference (variants.json says which variant has which).",
        f'@torch.library.custom_op("{ns}::{op}_backward", mutates_args=())',
        *_def(f"{op}_backward", [*grad_params, *params, "needs: list[bool]"], "list[torch.Tensor]"),
        '    """Gradients of the arguments marked in ``needs`` (the variant\'s backward, or the reference\'s)."""',
        f"    return _runtime.backward([{', '.join(grads)}], {tensor_list}, needs)",
        "",
        "",
        f"@{op}_backward.register_fake",
        f"def _({', '.join(grads)}, {call_args}, needs):",
        f"    return _runtime.backward_fake({tensor_list}, needs)",
        "",
        "",
        f"{op}.register_autograd(_runtime.backward_function(torch.ops.{ns}.{op}_backward),",
        f"{' ' * (len(op) + 19)}setup_context=_runtime.setup_context)",
        "",
    ]


def _def(name: str, params: list[str], returns: str) -> list[str]:
    """A ``def`` line, its parameters one per line when it would be long."""
    line = f"def {name}({', '.join(params)}) -> {returns}:"
    if len(line) <= 110:
        return [line]
    return [f"def {name}(", *(f"    {p}," for p in params), f") -> {returns}:"]


def _returns(outputs: dict[str, Any]) -> str:
    if outputs["container"] == "tensor":
        return "torch.Tensor"
    return f"tuple[{', '.join('torch.Tensor' for _ in outputs['items'])}]"


def _returns_text(outputs: dict[str, Any]) -> str:
    return "Tensor" if outputs["container"] == "tensor" else f"({', '.join('Tensor' for _ in outputs['items'])})"


def _state_expr(key: str) -> str:
    """``norm.weight`` -> ``self.norm.weight``; ``layers.0.weight`` -> ``getattr(self.layers, "0").weight``."""
    expr = "self"
    for part in key.split("."):
        expr = f"{expr}.{part}" if is_identifier(part) else f'getattr({expr}, "{part}")'
    return expr


# ------------------------------------------------------------------------------------------------ README.md


def render_readme(plan: PackagePlan, data: dict[str, Any]) -> str:
    ns, op, cls, pkg = plan.namespace, plan.op, plan.module_class, plan.package
    args = plan.arg_names()
    sig_rows = ["| argument | kind | dtype | shape verified |", "|---|---|---|---|"]
    for name, spec in zip(args, [*plan.inputs, *plan.state]):
        kind = f"{spec['kind']} `{spec['key']}`" if "key" in spec else "input"
        dtype = spec.get("dtype", spec["kind"])
        shape = ("×".join(str(d) for d in spec["shape"]) if "shape" in spec
                 else f"scalar ({spec.get('value')!r} in get_inputs)")
        sig_rows.append(f"| `{name}` | {kind} | {dtype} | {shape or 'scalar'} |")
    out_rows = ", ".join(f"{o['dtype']} {'×'.join(str(d) for d in o['shape']) or 'scalar'}"
                         for o in plan.outputs["items"])
    variant_rows = _variant_rows(data)
    traces = [f"- `{v['id']}`: {(v.get('trace') or {}).get('message', 'not traced')}" for v in data["variants"]]
    compile_text = _compile_text(plan)
    backward_text = _backward_text(plan)
    state_call = ", ".join(f"m.{s['key']}" if all(is_identifier(p) for p in s["key"].split(".")) else
                           f"m.state_dict()['{s['key']}']" for s in plan.state)
    inputs_call = ", ".join(i["name"] for i in plan.inputs)
    lines = [
        f"# `{pkg}` — `torch.ops.{ns}.{op}`",
        "",
        f"Exported by kernelwright {__version__} on {data['exported_at'][:10]} from the verified run(s) of "
        f"`{plan.problem_name}.py` (sha256 `{plan.runs[0].problem_sha256[:16]}…`). It needs only torch and triton.",
        "",
        "## The op",
        "",
        "```",
        f"torch.ops.{ns}.{op}({', '.join(args)}) -> {_returns_text(plan.outputs)}",
        "```",
        "",
        "The forward of the problem's `Model`: its inputs, then its parameters and buffers in `state_dict` order.",
        "",
        *sig_rows,
        "",
        f"Output: {out_rows} (at the shapes verified). `{cls}` is the problem's `Model` — same constructor "
        f"(`{cls}{_init_call(plan)}` here), same parameters and `state_dict` keys — whose forward calls the op, so "
        "`load_state_dict` from the original module works.",
        "",
        "## Use",
        "",
        "```python",
        f"import torch, {pkg}                    # registers torch.ops.{ns}.{op}",
        f"m = {pkg}.{cls}{_init_call(plan)}      # the problem's constructor arguments",
        "m.load_state_dict(original.state_dict())   # the user's original Model",
        f"y = m({inputs_call})",
        f"y = torch.ops.{ns}.{op}({', '.join(p for p in (inputs_call, state_call) if p)})   # the functional op",
        "m = torch.compile(m, fullgraph=True)     # no graph break through the op",
        f"{pkg}.variants(); {pkg}.variant_for('cuda')   # which variant runs where",
        "```",
        "",
        "## Variants",
        "",
        *variant_rows,
        "",
        "A call picks its implementation by the device of its inputs: on a CUDA device, the variant for its compute "
        "capability — the exact arch first, then the nearest older arch the variant can run on (an arch-specific "
        "`sm_90a` variant runs only on compute capability 9.0; a plain `sm_80` one on 8.0 and newer) — among the "
        "variants whose precision `torch.get_float32_matmul_precision()` allows (`highest`: fp32 only; `high`: TF32 "
        "too; `medium`: fp16/bf16 compute too); otherwise the reference. A variant runs only on arguments of the "
        "dtypes and ranks it was verified with; anything else (another dtype, another rank, CPU tensors, another "
        "GPU) runs the reference, which is the problem's own PyTorch code. With `TRITON_INTERPRET=1`, CPU tensors "
        "run a Triton variant in Triton's interpreter (how CPU tests exercise the real kernels).",
        "",
        f"`{pkg}.variant_for(capability=(8, 6))` says what a GPU of that capability would run; "
        f"`with {pkg}.assume_capability((9, 0)):` makes calls choose as on one; `{pkg}.dispatch_counts()` counts "
        "eager calls per implementation.",
        "",
        "## torch.compile",
        "",
        compile_text,
        "",
        *traces,
        "",
        "## Backward",
        "",
        backward_text,
        "",
        "## Files",
        "",
        "- `__init__.py` — the registration, the module class, `variants()`",
        "- `_runtime/` — which variant runs where, running it, loading its code, Triton's interpreter fixes (a copy "
        "of `kernelwright.runtime`: standard library, torch and Triton only)",
        "- `_reference.py` — the problem file, verbatim: the fallback, and what every variant was verified against",
        "- `_variants/<variant>.py` — each run's `best.py`, verbatim (a KernelBench `ModelNew` file)",
        *(["- `_variants/<variant>_backward.py` — the run's generated backward (`backward/best.py`), verbatim"]
          if any(r.backward for r in plan.runs) else []),
        "- `variants.json` — the variants with their arch, precision, source run and verdict summary",
        "",
        "## Limits",
        "",
        f"- The op is the problem's operator as `get_init_inputs()` configures it (`Model{_init_call(plan)}`): "
        "parameters and buffers must have the shapes recorded above (others are refused with a message). "
        f"`{cls}` built with other arguments is another operator: it runs the reference, with a warning.",
        "- Each variant's `ModelNew` is instantiated once per device (with the problem's `get_init_inputs()`, under "
        "a fixed seed that leaves your random state alone) and run with `torch.func.functional_call`, the op's "
        "parameters and buffers standing in for its own. A `ModelNew` that precomputes from its weights in "
        "`__init__` would not see yours; kernelwright's templates read them at every call.",
        "- The op runs the forward as the verifier ran it, in training mode (as KernelBench builds the model). "
        f"Where the reference reads `self.training` (dropout, batch norm), `{cls}` in `eval()` mode runs the "
        "reference instead; where it writes its buffers (running statistics), the op works on copies and "
        f"`{cls}` always runs the reference, so your buffers update as the original's do."
        + (" **This op is such a case.**" if plan.probe.get("mode_dependent") or any(
            st.get("mutated") for st in plan.state) else ""),
        "- Kernels were verified at the problem's shapes (CPU runs: at reduced sizes under the interpreter) and "
        "read their sizes from their tensors; other shapes of the same rank and dtype take the variant too. "
        "Dynamic-shape tracing (`torch.compile(dynamic=True)`) through a variant has not been tested.",
        "",
    ]
    return "\n".join(lines)


def _variant_rows(data: dict[str, Any]) -> list[str]:
    """The README's table of variants: where each runs, its verdict and timing, the run it came from."""
    variant_rows = ["| variant | arch | runs on | language | precision | verdict | timing | source run |",
                    "|---|---|---|---|---|---|---|---|"]
    for v in data["variants"]:
        verdict = v["verdict"] or {}
        median = verdict.get("median_ms")
        timing = f"{median:.4f} ms" if isinstance(median, (int, float)) else "not timed"
        speedup = (verdict.get("speedups") or {}).get("vs_eager")
        if isinstance(speedup, (int, float)):
            timing += f", {speedup:.2f}x eager"
        where = v["source"]["device_name"] or v["source"]["device"]
        sizes = verdict.get("size_overrides") or {}
        checked_at = f" (checked at {', '.join(f'{k} = {n}' for k, n in sizes.items())})" if sizes else ""
        variant_rows.append(f"| `{v['id']}` | {v['arch']} | {v['runs_on']} | {v['language']} | "
                            f"{PRECISION_LABELS[v['precision']]} | {verdict.get('status')}: "
                            f"{verdict.get('message') or ''}{checked_at} | {timing} | `{v['source']['run']}` "
                            f"({where}) |")
    variant_rows.append("| `reference` | any | everything else, and CPU tensors | PyTorch | as PyTorch | — | — | "
                        "`_reference.py` |")
    return variant_rows


def _backward_text(plan: PackagePlan) -> str:
    """The README's paragraph on the backward: generated kernels, the reference's vjp, or none."""
    ns, op = plan.namespace, plan.op
    generated = [r.id for r in plan.runs if r.backward]
    how = (f"**Generated backward kernels** for variant(s) {', '.join(f'`{g}`' for g in generated)}: the run's "
           "`optimize --backward` wrote the backward as a problem of its own (the reference differentiated with "
           "`torch.func.vjp`, traced into aten operators), the template library wrote its kernels and the verifier "
           "proved them against float64 (`_variants/<variant>_backward.py`, verdicts in `variants.json`). Where the "
           "chosen variant has none, or on the reference path, the gradient is `torch.func.vjp` of the reference."
           if generated else
           "**The backward recomputes through the reference**: no variant's run has a generated backward "
           "(`kernelwright optimize --backward` writes one), so the gradient is `torch.func.vjp` of the "
           "reference's functional form at the saved inputs and parameters (one extra reference forward, then its "
           "backward, in PyTorch).")
    backward_text = (
        f"The op is differentiable (`torch.library.register_autograd`). {how} The backward is its own op, "
        f"`torch.ops.{ns}.{op}_backward`, with a fake implementation, so `torch.compile` keeps a whole graph "
        "through training steps too. Higher-order gradients (grad of grad) are not supported."
        if plan.differentiable else
        "No backward is registered: the reference is not differentiable (no floating-point output, or no "
        "floating-point input or parameter).")
    return backward_text


def _init_call(plan: PackagePlan) -> str:
    text = str(plan.probe.get("init_inputs") or "[]")
    return "(" + text[1:-1] + ")" if text.startswith("[") and text.endswith("]") else f"(*{text})"


def _compile_text(plan: PackagePlan) -> str:
    if plan.registration == "triton_op":
        return ("Registered with `torch.library.triton_op`. Each variant's `@triton.jit` kernels are replaced, in "
                "the variant module, by their `torch.library.wrap_triton` wrappers, so when `torch.compile` traces "
                "the op on a CUDA device every kernel launch becomes a `triton_kernel_wrapper_functional` node that "
                "Inductor compiles and schedules with the rest of the graph; in eager mode the kernels launch "
                "directly. On the CPU the trace records the reference's PyTorch ops. At export, each variant's "
                "forward was traced with fake CUDA tensors (no GPU needed) to check that:")
    return (f"Registered with `torch.library.custom_op` and a fake implementation (the reference run on fake "
            f"tensors): `torch.compile` treats the op as one opaque call, with no graph break. Why not "
            f"`triton_op`: {plan.registration_reason}.")


def write_files(root: Path, plan: PackagePlan, runtime_sources: dict[str, str]) -> None:
    """Write the package into the (empty, temporary) directory ``root``; ``runtime_sources``: the text of each
    runtime file, by its path in the package (``_runtime/op.py``)."""
    data = variants_json(plan)
    (root / "_variants").mkdir(parents=True, exist_ok=True)
    (root / "_reference.py").write_text(plan.runs[0].problem_source)
    (root / "_variants" / "__init__.py").write_text('"""The variants: each run\'s best.py, verbatim."""\n')
    for run in plan.runs:
        (root / "_variants" / f"{run.id}.py").write_text(run.source)
        if run.backward:
            (root / "_variants" / f"{run.id}_backward.py").write_text(run.backward.source)
    for name, source in runtime_sources.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    (root / "variants.json").write_text(json.dumps(data, indent=1) + "\n")
    (root / "__init__.py").write_text(render_init(plan))
    (root / "README.md").write_text(render_readme(plan, data))


def read_variants_json(path: Path) -> dict[str, Any]:
    from kernelwright.errors import InputError

    file = path / "variants.json" if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"{path} is not a package kernelwright export wrote (no variants.json)")
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{file} is not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != "kernelwright-export":
        raise InputError(f"{file} is not a kernelwright export record")
    return data
