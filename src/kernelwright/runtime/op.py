"""The runtime of an exported op: which implementation runs for a call, and running it.

Every package ``kernelwright export`` writes carries :mod:`kernelwright.runtime` verbatim as its ``_runtime/``
folder, so this module imports only the standard library, torch, (lazily) triton and its siblings (relatively) —
never kernelwright. The package's generated ``__init__.py`` holds the op's signature and its ``torch.library``
registration; everything generic lives here and in :mod:`.dispatch` (choosing a variant, loading its code):

- **Variants**: each is a verified KernelBench ``ModelNew`` file kept verbatim in ``_variants/``. A call
  instantiates that variant's ``ModelNew`` once (cached per device and thread) and runs it on the given tensors with
  ``torch.func.functional_call``, the op's parameters and buffers standing in for the module's own. The reference
  ``Model`` (``_reference.py``) runs the same way wherever no variant applies.
- **Choice**: by the input device's compute capability — the exact arch, else the nearest older arch the variant
  can run on (an arch-specific ``sm_90a`` variant runs only on compute capability 9.0; plain ``sm_80`` runs on
  8.0 and newer), precision policies allowed by ``torch.get_float32_matmul_precision()``, then the reference. CPU
  tensors take the reference, except under ``TRITON_INTERPRET=1``, where a Triton variant runs in Triton's
  interpreter. A variant runs only for the dtypes and ranks it was verified with.
- **Inductor**: in a ``triton_op`` package each variant's ``@triton.jit`` kernels are replaced, in the variant
  module's globals, by their ``torch.library.wrap_triton`` wrappers, so every ``kernel[grid](...)`` launch is
  visible to ``torch.compile`` when it traces the op.
- **Backward**: the chosen variant's generated backward (``_variants/<id>_backward.py``: a verified
  ``ModelNew`` of the backward problem ``optimize --backward`` wrote, taking the inputs, the state and the
  incoming gradients, returning the gradients ``variants.json`` names), where the variant has one; otherwise
  recomputed through the reference with ``torch.func.vjp``.
"""

from __future__ import annotations

import collections
import contextlib
import json
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from .dispatch import (
    PRECISION_LABELS,
    VariantSpec,
    _capability_of,
    _no_dispatch_modes,
    build_instance,
    select_variant,
    wrap_launches,
)
from .interpreter import check_interpreter, interpreting
from .modules import load_module

__all__ = ["BACKWARD_SUFFIX", "REFERENCE", "OpRuntime", "format_variants", "runs_on_text"]

REFERENCE = "reference"
BACKWARD_SUFFIX = ":backward"  # dispatch_counts() key of a backward ("sm_90a:backward", "reference:backward")


def _is_fake(value: Any) -> bool:
    if not isinstance(value, torch.Tensor):
        return False
    if value.device.type == "meta":
        return True
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:  # pragma: no cover
        return False
    return bool(is_fake(value))


def _aliases(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return bool(torch._C._is_alias_of(a, b))
    except (AttributeError, RuntimeError):  # pragma: no cover
        return a is b


# ------------------------------------------------------------------------------------------------ the runtime


class OpRuntime:
    """Everything the generated ``__init__.py`` delegates to: one per exported op."""

    def __init__(self, *, package: str, root: Path) -> None:
        self.package = package
        self.root = Path(root)
        self.spec: dict[str, Any] = json.loads((self.root / "variants.json").read_text())
        self.inputs: list[dict[str, Any]] = list(self.spec["inputs"])
        self.state: list[dict[str, Any]] = list(self.spec["state"])
        self.state_keys = [s["key"] for s in self.state]
        self.outputs: dict[str, Any] = dict(self.spec["outputs"])
        self.registration: str = self.spec["registration"]
        self._variants = [VariantSpec.from_json(v) for v in self.spec["variants"]]
        self._by_id = {v.id: v for v in self._variants}
        self._lock = threading.RLock()
        self._modules: dict[tuple[str, bool], Any] = {}
        # functional_call swaps the call's tensors into the instance for the call's duration: two threads sharing
        # one instance would run with each other's parameters, so each thread builds its own
        self._local = threading.local()
        # arguments the reference writes in place (BatchNorm's running stats, an in-place op on an input): the op
        # declares no mutation, so those are cloned before every run
        self._mutated = [i for i, s in enumerate([*self.inputs, *self.state]) if s.get("mutated")]
        self._mode_dependent = bool(self.spec.get("mode_dependent"))
        self._writes_state = any(s.get("mutated") for s in self.state)
        self._capabilities: dict[int, tuple[int, int]] = {}
        self._assumed: tuple[int, int] | None = None
        self._counts: collections.Counter[str] = collections.Counter()
        self._warned_configuration = False
        self._init_values: list[Any] | None = None

    # -- what runs where -------------------------------------------------------------------------------------

    def variants(self) -> list[dict[str, Any]]:
        """Every variant as recorded in ``variants.json`` (arch, precision, where it runs, source run, verdict)."""
        return [dict(v) for v in self.spec["variants"]]

    def describe(self) -> str:
        return format_variants(self.spec)

    @contextlib.contextmanager
    def assume_capability(self, capability: tuple[int, int] | None) -> Iterator[None]:
        """Choose variants as if every CUDA device had ``capability`` (tests, and tracing for another GPU)."""
        previous, self._assumed = self._assumed, (tuple(capability) if capability is not None else None)
        try:
            yield
        finally:
            self._assumed = previous

    def variant_for(self, device: torch.device | str | None = None, *, capability: tuple[int, int] | None = None,
                    precision: str | None = None, interpreted: bool | None = None) -> str:
        """The id of the variant a call on ``device`` would run (``"reference"`` for the fallback). A given
        ``capability`` stands for a CUDA device of that compute capability, present or not."""
        precision = precision or torch.get_float32_matmul_precision()
        if capability is None:
            dev = torch.device(device) if device is not None else torch.device(
                "cuda" if torch.cuda.is_available() else "cpu")
            if dev.type == "cuda":
                capability = self._capability(dev)
            elif dev.type != "cpu":
                return REFERENCE
        else:
            capability = (int(capability[0]), int(capability[1]))
        interpreted = interpreting() if interpreted is None else interpreted
        chosen = select_variant(self._variants, capability=capability, precision=precision, interpreted=interpreted)
        return chosen.id if chosen is not None else REFERENCE

    def dispatch_counts(self) -> dict[str, int]:
        """How many eager calls each implementation ran in this process (``"reference"`` included)."""
        return dict(self._counts)

    def _capability(self, device: torch.device) -> tuple[int, int]:
        if self._assumed is not None:
            return self._assumed
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in self._capabilities:
            self._capabilities[index] = tuple(torch.cuda.get_device_capability(index))  # type: ignore[assignment]
        return self._capabilities[index]

    def _choose(self, args: Sequence[Any]) -> VariantSpec | None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or not self._verified_dtypes(args):
            return None
        device = tensors[0].device
        fake = _is_fake(tensors[0])
        if device.type == "cuda":
            capability: tuple[int, int] | None = self._capability(device)
            interpreted = False
        elif device.type == "cpu" and not fake:
            capability, interpreted = None, interpreting()
            if interpreted:
                check_interpreter()
        else:  # meta, or fake CPU tensors: a trace on the CPU records the reference
            return None
        return select_variant(self._variants, capability=capability,
                              precision=torch.get_float32_matmul_precision(), interpreted=interpreted)

    def _verified_dtypes(self, args: Sequence[Any]) -> bool:
        """A variant runs only on arguments of the dtypes and ranks the verifier checked it with."""
        for arg, recorded in zip(args, [*self.inputs, *self.state]):
            if recorded.get("kind", "tensor") not in ("tensor", "parameter", "buffer"):
                continue
            if not isinstance(arg, torch.Tensor):
                return False
            if str(arg.dtype).removeprefix("torch.") != recorded["dtype"] or arg.dim() != len(recorded["shape"]):
                return False
        return True

    # -- running ---------------------------------------------------------------------------------------------

    def forward(self, *args: Any) -> Any:
        """The op's body: the chosen variant's (or the reference's) forward on these inputs and state."""
        chosen = self._choose(args)
        if chosen is None:
            out = self._run_reference(args)
            name = REFERENCE
        else:
            out = self._run_variant(chosen, args)
            name = chosen.id
        if not any(_is_fake(a) for a in args):
            self._counts[name] += 1
        return self._finish(out, args)

    def forward_fake(self, *args: Any) -> Any:
        """Output shapes and dtypes (the fake implementation): the reference, run on the fake tensors."""
        return self._finish(self._run_reference(args), args)

    def _protect(self, args: Sequence[Any]) -> list[Any]:
        """``args`` with those the reference writes in place cloned: the op is functional (``mutates_args=()``)."""
        args = list(args)
        for i in self._mutated:
            if i < len(args) and isinstance(args[i], torch.Tensor):
                args[i] = args[i].clone()
        return args

    def _run_reference(self, args: Sequence[Any]) -> Any:
        args = self._protect(args)
        device = _device_of(args)
        model = self._instance(REFERENCE, False, device)
        inputs, state = self._split(args)
        return torch.func.functional_call(model, dict(zip(self.state_keys, state)), tuple(inputs))

    def _run_variant(self, variant: VariantSpec, args: Sequence[Any]) -> Any:
        args = self._protect(args)
        interpreted = _device_of(args).type == "cpu"
        model = self._instance(variant.id, interpreted, _device_of(args))
        inputs, state = self._split(args)
        # The verifier checked the variant on contiguous tensors (the problem's get_inputs): a transposed or
        # sliced argument is made contiguous, not trusted to a kernel that may index it as if it were.
        inputs = [x.contiguous() if isinstance(x, torch.Tensor) else x for x in inputs]
        state = [t.contiguous() if isinstance(t, torch.Tensor) else t for t in state]
        by_reference_key = dict(zip(self.state_keys, state))
        if variant.state_map:
            mapping = {own: by_reference_key[ref] for own, ref in variant.state_map.items()}
        else:
            mapping = by_reference_key
        return torch.func.functional_call(model, mapping, tuple(inputs))

    def _split(self, args: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        n = len(self.inputs)
        if len(args) != n + len(self.state):
            raise TypeError(f"{self.spec['op']} takes {n} input(s) and {len(self.state)} parameter/buffer "
                            f"tensor(s), got {len(args)} argument(s)")
        for value, recorded in zip(args[n:], self.state):
            if not isinstance(value, torch.Tensor) or list(value.shape) != list(recorded["shape"]):
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"{self.spec['op']}: {recorded['key']} is {shape}, but the op was exported for "
                                 f"the problem's Model{self._init_text()}, whose {recorded['key']} is "
                                 f"{tuple(recorded['shape'])}")
        return list(args[:n]), list(args[n:])

    def _init_text(self) -> str:
        return "(" + ", ".join(repr(v) for v in self._init_inputs()) + ")"

    def same_configuration(self, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        """Whether ``Model(*args, **kwargs)`` is the configuration the op was exported for (the problem's
        ``get_init_inputs()``); the package's module class runs the reference when it is not."""
        import inspect

        init = self._reference_module().Model.__init__
        try:
            signature = inspect.signature(init)
            given = signature.bind(None, *args, **kwargs)
            exported = signature.bind(None, *self._init_inputs())
        except TypeError:
            return False
        given.apply_defaults()
        exported.apply_defaults()
        same = all(_same_value(given.arguments.get(k), v) for k, v in exported.arguments.items() if k != "self")
        if not same and not self._warned_configuration:
            self._warned_configuration = True
            import warnings

            shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
            warnings.warn(f"{self.spec['module_class']}({shown}) is not the configuration "
                          f"{self.spec['op']} was exported for ({self.spec['module_class']}{self._init_text()}): "
                          "this module runs the reference, not the op", stacklevel=3)
        return same

    def module_runs_reference(self, training: bool) -> bool:
        """Whether the package's module class, in ``training`` mode, must run the reference to do what ``Model``
        does: the op always computes as in training mode, and writes no buffer (running statistics)."""
        return (self._mode_dependent and not training) or self._writes_state

    def _finish(self, out: Any, args: Sequence[Any]) -> Any:
        items = list(out) if isinstance(out, (tuple, list)) else [out]
        expected = len(self.outputs["items"])
        if len(items) != expected:
            raise RuntimeError(f"{self.spec['op']}: the implementation returned {len(items)} output(s), "
                               f"the op declares {expected}")
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        # an op's output may alias neither its inputs (the reference may return a view of one) nor another output
        # (``return y, y.view(-1)``): copy those
        kept: list[Any] = []
        for item in items:
            kept.append(item.clone() if any(_aliases(item, t) for t in [*tensors, *kept]) else item)
        items = kept
        return items[0] if self.outputs["container"] == "tensor" else tuple(items)

    def _instance(self, key: str, interpreted: bool, device: torch.device) -> torch.nn.Module:
        instances: dict[tuple[str, bool, str], torch.nn.Module] | None = getattr(self._local, "instances", None)
        if instances is None:
            instances = self._local.instances = {}
        cache_key = (key, interpreted, str(device))
        model = instances.get(cache_key)
        if model is None:
            with self._lock:  # loading modules is not thread-safe
                if key == REFERENCE:
                    model_cls, keys = self._reference_module().Model, self.state_keys
                else:
                    variant = self._by_id[key]
                    model_cls = self._variant_module(variant, interpreted).ModelNew
                    keys = list(variant.state_map) if variant.state_map else self.state_keys
                model = build_instance(model_cls, self._init_inputs(), keys, device)
            instances[cache_key] = model
        return model

    def _reference_module(self) -> Any:
        return sys.modules.get(f"{self.package}._reference") or load_module(
            f"{self.package}._reference", self.root / "_reference.py")

    def _init_inputs(self) -> list[Any]:
        """The problem's ``get_init_inputs()`` (called once, under a fixed seed that leaves the caller's alone)."""
        if self._init_values is None:
            module = self._reference_module()
            values: Any = []
            if hasattr(module, "get_init_inputs"):
                with _no_dispatch_modes(), torch.random.fork_rng(devices=[]):
                    torch.manual_seed(0)
                    values = module.get_init_inputs()
            self._init_values = list(values) if isinstance(values, (list, tuple)) else [values]
        return self._init_values

    def _variant_module(self, variant: VariantSpec, interpreted: bool, *, backward: bool = False) -> Any:
        name = variant.id + ("_backward" if backward else "")
        key = (name, interpreted)
        module = self._modules.get(key)
        if module is None:
            suffix = "_interpreted" if interpreted else ""
            file = variant.backward_file if backward else variant.file
            module = load_module(f"{self.package}._variants.{name}{suffix}", self.root / str(file))
            # the backward runs inside its own custom_op: Inductor never traces it, so its launches stay raw
            if self.registration == "triton_op" and not interpreted and not backward:
                wrap_launches(module)
            self._modules[key] = module
        return module

    # -- autograd --------------------------------------------------------------------------------------------

    def setup_context(self, ctx: Any, inputs: Sequence[Any], output: Any) -> None:
        """Save the forward's arguments: the backward recomputes through the reference."""
        positions = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)]
        ctx.kw_positions = positions
        ctx.kw_others = {i: a for i, a in enumerate(inputs) if not isinstance(a, torch.Tensor)}
        ctx.kw_count = len(inputs)
        ctx.save_for_backward(*[inputs[i] for i in positions])

    def backward_function(self, backward_op: Any) -> Any:
        """The ``register_autograd`` backward: calls the package's backward op with the saved arguments."""

        def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
            args: list[Any] = [None] * ctx.kw_count
            for i, t in zip(ctx.kw_positions, ctx.saved_tensors):
                args[i] = t
            for i, value in ctx.kw_others.items():
                args[i] = value
            needs = [bool(n) and isinstance(args[i], torch.Tensor) for i, n in enumerate(ctx.needs_input_grad)]
            if not any(needs):
                return tuple(None for _ in args)
            computed = iter(backward_op(*grads, *args, needs))
            return tuple(next(computed) if need else None for need in needs)

        return backward

    def backward(self, grads: Sequence[Any], args: Sequence[Any], needs: Sequence[bool]) -> list[torch.Tensor]:
        """Gradients of the arguments marked in ``needs``: the chosen variant's generated backward where it has
        one and every needed gradient is among those it computes, else :meth:`reference_backward`."""
        chosen = self._choose(args)
        float_outputs = [i for i, o in enumerate(self.outputs["items"]) if o["dtype"] in _FLOAT_DTYPES]
        if chosen is not None and chosen.backward_file and all(grads[i] is not None for i in float_outputs):
            names = [i["name"] for i in self.inputs] + self.state_keys
            where = {name: k for k, name in enumerate(chosen.gradients)}
            if all(names[i] in where for i, need in enumerate(needs) if need):
                computed = self._run_backward(chosen, [grads[i] for i in float_outputs], args)
                self._counts[chosen.id + BACKWARD_SUFFIX] += 1
                return [computed[where[names[i]]] for i, need in enumerate(needs) if need]
        self._counts[REFERENCE + BACKWARD_SUFFIX] += 1
        return self.reference_backward(grads, args, needs)

    def _run_backward(self, variant: VariantSpec, grads: Sequence[torch.Tensor], args: Sequence[Any]
                      ) -> list[torch.Tensor]:
        """The variant's backward ``ModelNew`` on the inputs, the state and the incoming gradients (contiguous, as
        the verifier checked it); one gradient per name in ``variant.gradients``."""
        device = _device_of(args)
        interpreted = device.type == "cpu"
        instances = getattr(self._local, "backward_instances", None)
        if instances is None:
            instances = self._local.backward_instances = {}
        key = (variant.id, interpreted, str(device))
        model = instances.get(key)
        if model is None:
            with self._lock:
                module = self._variant_module(variant, interpreted, backward=True)
                with _no_dispatch_modes(), torch.random.fork_rng(devices=[]):
                    model = module.ModelNew().to(device)  # a backward problem has no constructor arguments
            instances[key] = model
        values = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in [*args, *grads]]
        with torch.no_grad():
            out = model(*values)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(out) != len(variant.gradients):
            raise RuntimeError(f"{self.spec['op']}: variant {variant.id}'s backward returned {len(out)} "
                               f"gradient(s), variants.json names {len(variant.gradients)}")
        given = [t for t in [*grads, *args] if isinstance(t, torch.Tensor)]
        kept: list[torch.Tensor] = []
        for g in out:
            kept.append(g.clone() if any(_aliases(g, t) for t in [*given, *kept]) else g)
        return kept

    def reference_backward(self, grads: Sequence[Any], args: Sequence[Any], needs: Sequence[bool]
                           ) -> list[torch.Tensor]:
        """Gradients of the arguments marked in ``needs``, by ``torch.func.vjp`` of the reference's functional
        form at ``args`` (outputs without a gradient count as zero)."""
        wrt = [i for i, need in enumerate(needs) if need]
        float_outputs = [i for i, o in enumerate(self.outputs["items"]) if o["dtype"] in _FLOAT_DTYPES]

        def function(*diff: torch.Tensor) -> tuple[torch.Tensor, ...]:
            full = list(args)
            for i, value in zip(wrt, diff):
                full[i] = value
            out = self._run_reference(full)
            items = list(out) if isinstance(out, (tuple, list)) else [out]
            return tuple(items[i] for i in float_outputs)

        with torch.enable_grad():
            outs, vjp = torch.func.vjp(function, *[args[i] for i in wrt])
            cotangents = tuple(grads[i] if grads[i] is not None else torch.zeros_like(o)
                               for i, o in zip(float_outputs, outs))
            result = vjp(cotangents)
        given = [t for t in [*grads, *args] if isinstance(t, torch.Tensor)]
        out: list[torch.Tensor] = []
        for i, g in zip(wrt, result):
            g = g.detach() if g is not None else torch.zeros_like(args[i])
            # the gradient of a + b is the incoming gradient itself, and a's and b's are one tensor: an op's
            # outputs may alias neither its inputs nor each other
            out.append(g.clone() if any(_aliases(g, t) for t in [*given, *out]) else g)
        return out

    def backward_fake(self, args: Sequence[Any], needs: Sequence[bool]) -> list[torch.Tensor]:
        return [torch.empty_like(args[i]) for i, need in enumerate(needs) if need]


_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and bool(
            torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - an exotic value that cannot be compared is not the same
        return False


def _device_of(args: Sequence[Any]) -> torch.device:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


# ------------------------------------------------------------------------------------------------ describing


def runs_on_text(arch: str) -> str:
    major, minor = _capability_of(arch)
    if arch.endswith("a"):
        return f"cc {major}.{minor} only"
    if arch.endswith("f"):
        return f"cc {major}.{minor}-{major}.x"
    return f"cc {major}.{minor}+"


def format_variants(spec: dict[str, Any]) -> str:
    """The package's variants as a plain-text table (``kernelwright export --list`` prints this)."""
    head = (f"{spec['package']}: torch.ops.{spec['namespace']}.{spec['op']} ({spec['registration']}; "
            f"backward: {spec['backward']['method'] if spec.get('backward') else 'none'}) — "
            f"problem {spec['problem']['name']}")
    rows = [("variant", "arch", "runs on", "lang", "precision", "verdict", "timing", "backward", "source run")]
    for v in spec["variants"]:
        verdict = v.get("verdict") or {}
        median = verdict.get("median_ms")
        timing = f"{median:.4f} ms" if isinstance(median, (int, float)) else "not timed"
        speedup = (verdict.get("speedups") or {}).get("vs_eager")
        if isinstance(speedup, (int, float)):
            timing += f", {speedup:.2f}x eager"
        source = v.get("source") or {}
        rows.append((v["id"], v["arch"], runs_on_text(v["arch"]), v["language"],
                     PRECISION_LABELS.get(v["precision"], v["precision"]), str(verdict.get("status", "?")),
                     timing, "generated" if v.get("backward") else "reference",
                     f"{source.get('run', '?')} ({source.get('device_name') or source.get('device', '?')})"))
    rows.append((REFERENCE, "any", "anything else, CPU", "torch", "as PyTorch", "-", "-", "reference",
                 "_reference.py"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join([head, "", *lines])
