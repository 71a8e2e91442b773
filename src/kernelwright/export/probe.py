"""Find out what the op's signature is and whether each variant fits it — by running the problem and the variants.

The probe imports the reference (the problem file) and builds ``Model(*get_init_inputs())`` and ``get_inputs()``
on the meta device (falling back to the CPU where an op has no meta kernel), to learn the forward's inputs, the
parameters and buffers in ``state_dict`` order, and the outputs. For each Triton variant it checks that
``ModelNew`` holds the same state (by name, or by position when only the names differ) and traces the variant's
forward the way ``torch.compile`` traces a ``triton_op`` — fake CUDA tensors, ``wrap_triton``-wrapped kernels,
AOTAutograd's functionalisation — to see every kernel launch reach the graph as a
``triton_kernel_wrapper_functional`` node. That needs no GPU.

The code is the runs' own, so the CLI runs the probe as an isolated job (``export_probe``, under
:mod:`kernelwright.isolation`'s policy: its own process group, a time limit, a scrubbed environment, a memory limit
where no GPU is visible); :func:`kernelwright.load`, which imports the code anyway, runs it in-process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kernelwright.isolation.protocol import JobError
from kernelwright.jobs.export_probe import ExportProbeResult, ExportProbeSpec, ProbeVariant
from kernelwright.problem.signature import forward_input_names

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 300.0
NO_CUDA_BUILD = "not linked with support for cuda"


class ProbeError(Exception):
    """The problem or a variant cannot be exported (one line, for the user)."""


def run_probe(spec: ExportProbeSpec | Mapping[str, Any], *, isolate: bool = True,
              timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """Probe in a child process (``isolate``) or here; ``{"ok": False, "message": ...}`` on failure."""
    spec = ExportProbeSpec.from_json(spec)
    if not isolate:
        try:
            return probe(spec)
        except ProbeError as exc:
            return {"ok": False, "message": str(exc)}
    import shutil

    import torch

    from kernelwright.isolation.process import job_environment, memory_limit, run_child

    workdir = Path(tempfile.mkdtemp(prefix="kernelwright-export-probe-"))
    try:
        # The real Triton front end, never the interpreter: the probe traces launches the way torch.compile does.
        run = run_child("export_probe", spec, workdir=workdir, timeout_s=timeout_s,
                        env_extra={**job_environment(None), "TRITON_INTERPRET": "0"},
                        memory_limit_bytes=0 if torch.cuda.is_available() else memory_limit("cpu"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if run.timed_out:
        return {"ok": False, "message": f"probing the problem and variants took more than {timeout_s:.0f} s"}
    result = run.report(ExportProbeResult)
    if result is not None:
        return result.result
    error = run.report(JobError)
    if error is not None:
        return {"ok": False, "message": f"the probe failed: {error.message[:300]}"}
    lines = [line for line in run.stderr_tail.splitlines() if line.strip()]
    return {"ok": False, "message": f"the probe process {run.describe_exit()}" + (f": {lines[-1][:300]}" if lines
                                                                                else "")}


def run_export_probe_job(spec: ExportProbeSpec, channel: Any) -> None:
    """The ``export_probe`` job (isolation/child.py): :func:`probe`, its one-line failure as data."""
    try:
        result = probe(spec)
    except ProbeError as exc:
        result = {"ok": False, "message": str(exc)}
    channel.send(ExportProbeResult(result=result))


def probe(spec: ExportProbeSpec | Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` (or its JSON): the problem file, the variants, whether to trace them, the module-name prefix.
    Raises :class:`ProbeError`."""
    import torch

    from kernelwright import runtime

    spec = ExportProbeSpec.from_json(spec)
    prefix = spec.prefix or "kernelwright_export_probe"
    try:
        reference = runtime.load_module(f"{prefix}_reference", Path(spec.reference))
    except Exception as exc:
        raise ProbeError(f"the problem file does not import: {type(exc).__name__}: {exc}") from None
    if not isinstance(getattr(reference, "Model", None), type):
        raise ProbeError("the problem defines no class Model")
    init_inputs = _call(reference, "get_init_inputs", default=[])
    init_inputs = list(init_inputs) if isinstance(init_inputs, (list, tuple)) else [init_inputs]
    where, inputs, model, outputs, mutated = _run_reference(reference, init_inputs)
    state = _state_of(model)
    names = forward_input_names(reference.Model, len(inputs))
    input_specs = [_input_spec(name, value, i) for i, (name, value) in enumerate(zip(names, inputs))]
    for i, spec_ in enumerate([*input_specs, *state]):
        if i in mutated:
            spec_["mutated"] = True
    output_specs, container = _output_specs(outputs)
    float_dtypes = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    differentiable = any(o.dtype in float_dtypes for o in _flat(outputs)) and (
        any(isinstance(v, torch.Tensor) and v.dtype in float_dtypes for v in inputs)
        or any(t.dtype in float_dtypes for t in model.state_dict().values()))
    result: dict[str, Any] = {
        "ok": True,
        "ran_on": where,
        "inputs": input_specs,
        "state": state,
        "outputs": {"container": container, "items": output_specs},
        "init_inputs": repr(init_inputs)[:500],
        "differentiable": differentiable,
        "mode_dependent": mode_dependent(model),
        "variants": {},
    }
    for variant in spec.variants:
        result["variants"][variant.id] = _probe_variant(variant, prefix, init_inputs, state, input_specs,
                                                           trace=spec.trace)
    return result


# ------------------------------------------------------------------------------------------------ the reference


def _call(module: Any, name: str, *, default: Any) -> Any:
    fn = getattr(module, name, None)
    if fn is None:
        return default
    try:
        return fn()
    except Exception as exc:
        raise ProbeError(f"the problem's {name}() failed: {type(exc).__name__}: {exc}") from None


def _run_reference(reference: Any, init_inputs: list[Any]) -> tuple[str, list[Any], Any, Any, set[int]]:
    """Inputs, the model, its outputs, and which of the op's arguments (inputs, then state) the forward wrote in
    place (by their version counters): on the meta device if every op has a meta kernel, else the CPU."""
    import torch

    failure = ""
    for where in ("meta", "cpu"):
        with torch.random.fork_rng(devices=[]), torch.device(where), torch.no_grad():
            torch.manual_seed(0)
            try:
                inputs = _call(reference, "get_inputs", default=None)
                if not isinstance(inputs, (list, tuple)):
                    raise ProbeError("the problem's get_inputs() must return a list")
                model = reference.Model(*init_inputs)
                arguments = [*inputs, *model.state_dict(keep_vars=True).values()]
                versions = [a._version if isinstance(a, torch.Tensor) else None for a in arguments]
                with _Writes(arguments) as writes:
                    outputs = model(*inputs)
            except ProbeError:
                raise
            except Exception as exc:
                failure = f"{type(exc).__name__}: {exc}"
                log.info("the reference does not run on %s: %s", where, failure)
                continue
        mutated = writes.written | {i for i, (a, v) in enumerate(zip(arguments, versions))
                                    if isinstance(a, torch.Tensor) and a._version != v}
        return where, list(inputs), model, outputs, mutated
    raise ProbeError(f"the problem's Model does not run on the CPU: {failure}")


def _Writes(arguments: list[Any]) -> Any:  # noqa: N802 - builds the mode class lazily (torch imported late)
    """A dispatch mode that records which of ``arguments`` an op writes, by the ops' schemas: version counters
    alone miss writes on the meta device (``native_batch_norm``'s meta kernel leaves its running stats alone)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Writes(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.written: set[int] = set()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            schema = func._schema.arguments
            for i, arg in enumerate(schema):
                written = arg.alias_info is not None and arg.alias_info.is_write
                # native_batch_norm updates its running stats in training, though its schema does not say so
                if func is torch.ops.aten.native_batch_norm.default and arg.name in ("running_mean", "running_var"):
                    written = bool(args[5] if len(args) > 5 else kwargs.get("training"))
                if not written:
                    continue
                value = args[i] if i < len(args) else kwargs.get(arg.name)
                for t in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(t, torch.Tensor):
                        self.written.update(j for j, a in enumerate(arguments)
                                            if isinstance(a, torch.Tensor) and torch._C._is_alias_of(t, a))
            return func(*args, **kwargs)

    return Writes()


def mode_dependent(model: Any) -> bool:
    """Whether the forward may behave differently in ``train()`` and ``eval()`` mode: some module's forward reads
    ``self.training`` (dropout, batch norm, instance norm with running stats, a hand-written check)."""
    for module in model.modules():
        code = getattr(type(module).forward, "__code__", None)
        if code is not None and "training" in code.co_names:
            return True
    return False


def _input_spec(name: str, value: Any, index: int) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return {"name": name, "kind": "tensor", "dtype": _dtype(value), "shape": list(value.shape)}
    for kind in (bool, int, float):
        if isinstance(value, kind):
            return {"name": name, "kind": kind.__name__, "value": value}
    raise ProbeError(f"input {index} of get_inputs() is a {type(value).__name__}; an exported op takes tensors, "
                     "ints, floats and bools")


def _state_of(model: Any) -> list[dict[str, Any]]:
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    return [{"key": key, "kind": "parameter" if key in params else "buffer", "dtype": _dtype(value),
             "shape": list(value.shape), "requires_grad": bool(value.requires_grad)}
            for key, value in model.state_dict(keep_vars=True).items()]


def _flat(outputs: Any) -> list[Any]:
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def _output_specs(outputs: Any) -> tuple[list[dict[str, Any]], str]:
    import torch

    items = _flat(outputs)
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise ProbeError(f"the problem's Model returns a {type(item).__name__} as output {i}; an exported op "
                             "returns tensors")
    if not items:
        raise ProbeError("the problem's Model returns nothing")
    container = "tuple" if isinstance(outputs, (tuple, list)) else "tensor"
    return [{"dtype": _dtype(t), "shape": list(t.shape)} for t in items], container


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


# ------------------------------------------------------------------------------------------------ variants


def _probe_variant(variant: ProbeVariant, prefix: str, init_inputs: list[Any], state: list[dict[str, Any]],
                   inputs: list[dict[str, Any]], *, trace: bool) -> dict[str, Any]:
    from kernelwright import runtime

    if variant.language != "triton":
        return {"state_map": None, "state_note": "not checked: a CUDA C++ variant is built at first use",
                "trace": {"ok": False, "message": "CUDA C++ (load_inline): registered with custom_op"}}
    with _compiled_triton():
        try:
            module = runtime.load_module(f"{prefix}_variant_{variant.id}", Path(variant.path))
        except Exception as exc:
            raise ProbeError(f"variant {variant.id} ({variant.shown}) does not import "
                             f"here: {type(exc).__name__}: {exc}") from None
        own = _variant_state(module, init_inputs)
        if own is None:
            return {"state_map": None, "state_note": "not checked: ModelNew(*get_init_inputs()) did not build here",
                    "trace": {"ok": False, "message": "not traced: ModelNew did not build on this machine"}}
        state_map = match_state(state, own, variant)
        result: dict[str, Any] = {"state_map": state_map,
                                  "state_note": "by position" if state_map else "same names as the reference",
                                  "launched": sorted(runtime.launched_kernels(module))}
        if trace:
            result["trace"] = _trace(module, init_inputs, state, inputs, state_map)
        else:
            result["trace"] = {"ok": True, "checked": False, "message": "not traced (trace check skipped)"}
    return result


@contextlib.contextmanager
def _compiled_triton() -> Iterator[None]:
    """Import variants as compiled (not interpreted) kernels: wrap_triton and tracing need JITFunctions."""
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous


def _variant_state(module: Any, init_inputs: list[Any]) -> list[dict[str, Any]] | None:
    import torch

    model_cls = getattr(module, "ModelNew", None)
    for where in ("meta", "cpu"):
        with torch.random.fork_rng(devices=[]), torch.device(where), torch.no_grad():
            torch.manual_seed(0)
            try:
                return _state_of(model_cls(*init_inputs))
            except Exception as exc:
                log.info("ModelNew does not build on %s: %s", where, exc)
    return None


def match_state(reference: list[dict[str, Any]], own: list[dict[str, Any]],
                variant: dict[str, Any]) -> dict[str, str] | None:
    """None when ModelNew's state_dict has the reference's keys and shapes; else the variant-key -> reference-key
    map by position, when counts and shapes agree; else :class:`ProbeError`."""
    ref = {s["key"]: s["shape"] for s in reference}
    mine = {s["key"]: s["shape"] for s in own}
    if ref == mine:
        return None
    if len(reference) == len(own) and all(a["shape"] == b["shape"] for a, b in zip(reference, own)):
        return {b["key"]: a["key"] for a, b in zip(reference, own)}
    raise ProbeError(f"variant {variant.id} ({variant.shown}): ModelNew holds "
                     f"{_keys(own)}, the reference holds {_keys(reference)}; the op passes the reference's "
                     "parameters, so ModelNew must hold the same ones (same names, or same shapes in order)")


def _keys(state: list[dict[str, Any]]) -> str:
    return ", ".join(f"{s['key']}{tuple(s['shape'])}" for s in state) or "no parameters or buffers"


def _trace(module: Any, init_inputs: list[Any], state: list[dict[str, Any]], inputs: list[dict[str, Any]],
           state_map: dict[str, str] | None) -> dict[str, Any]:
    """Trace the variant's forward as torch.compile traces a triton_op on a CUDA device, on fake tensors."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernelwright import runtime

    try:
        import torch._dynamo  # noqa: F401  (its import sets torch's log levels: before ours below)
        from torch._functorch.aot_autograd import aot_function
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    except ImportError as exc:  # pragma: no cover - torch without triton_op support
        return {"ok": False, "message": f"this torch cannot trace Triton kernels ({exc})"}
    wrapped = runtime.wrap_launches(module)
    if not wrapped:
        return {"ok": False, "message": "ModelNew launches no @triton.jit kernel that wrap_triton can wrap"}
    keys = list(state_map) if state_map else [s["key"] for s in state]
    try:
        model = runtime.build_instance(module.ModelNew, init_inputs, keys, torch.device("cpu"))
    except Exception as exc:
        return {"ok": False, "message": f"ModelNew did not build: {type(exc).__name__}: {exc}"}
    graphs: list[Any] = []

    def capture(gm: Any, _example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm

    def forward(*args: Any) -> Any:
        n = len(inputs)
        return torch.func.functional_call(model, dict(zip(keys, args[n:])), tuple(args[:n]))

    def attempt(device: str) -> str:
        with _without_driver_warnings(), _no_raw_launches(), FakeTensorMode(allow_non_fake_inputs=True):
            args = [_fake(spec, device) for spec in inputs] + [_fake(spec, device) for spec in state]
            try:
                aot_function(forward, fw_compiler=capture)(*args)
            except Exception as exc:  # after the capture, running the graph needs a real GPU
                return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return ""

    error, where = attempt("cuda"), "fake CUDA tensors"
    if not graphs and NO_CUDA_BUILD in error:
        # A CPU-only torch cannot fake some CUDA ops (`.contiguous()` or `copy_` of a strided fake CUDA tensor
        # fail in its C++ device guard; torch 2.13 CPU). Meta tensors trace the same Python code; a GPU machine's
        # torch traces with CUDA fakes, the faithful check.
        error, where = attempt("meta"), "fake meta tensors (this torch is built without CUDA)"
    if not graphs:
        return {"ok": False, "message": f"the forward does not trace with {where}: {error[:300]}"}
    kernels = []
    for node in graphs[0].graph.nodes:
        if node.op == "call_function" and "triton_kernel_wrapper" in str(node.target):
            kernel = kernel_side_table.get_kernel(node.kwargs["kernel_idx"])
            kernels.append(getattr(getattr(kernel, "fn", kernel), "__name__", str(kernel)))
    if not kernels:
        return {"ok": False, "message": "the traced forward holds no Triton kernel call"}
    return {"ok": True, "checked": True, "kernels_in_graph": kernels, "traced_with": where,
            "message": f"{len(kernels)} kernel launch(es) in the graph traced with {where}: "
                       f"{', '.join(sorted(set(kernels)))}"}


class RawLaunch(RuntimeError):
    """A kernel launched without wrap_triton during the trace."""


@contextlib.contextmanager
def _no_raw_launches() -> Iterator[None]:
    """During the trace a launch that bypasses wrap_triton would run a real kernel on fake tensors (on a GPU
    machine: pointers to nothing). Refuse it: that variant is not traceable, so the op becomes a custom_op."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(getattr(self, "fn", None), "__name__", type(self).__name__)
        raise RawLaunch(f"kernel {name} is launched without torch.library.wrap_triton (not a module-level "
                        "@triton.jit global that ModelNew's code launches by name)")

    saved = JITFunction.run, Autotuner.run
    JITFunction.run = refuse  # type: ignore[method-assign]
    Autotuner.run = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        JITFunction.run, Autotuner.run = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def _without_driver_warnings() -> Iterator[None]:
    """Without a GPU driver, the kernel-mutation analysis logs a traceback per kernel and then assumes every
    argument is written (correct, only conservative): keep that out of the user's terminal."""

    def keep(record: logging.LogRecord) -> bool:
        return "identify_accessed_tensors" not in record.getMessage()

    logger = logging.getLogger("torch._dynamo")
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def _fake(spec: dict[str, Any], device: str) -> Any:
    import torch

    if spec.get("kind", "tensor") in ("tensor", "parameter", "buffer"):
        return torch.empty(spec["shape"], dtype=getattr(torch, spec["dtype"]), device=device)
    return spec["value"]
