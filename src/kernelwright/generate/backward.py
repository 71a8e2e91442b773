"""The backward of a problem, written as a problem of its own, so the template library can write its kernels.

``write_backward_problem(problem, out)`` differentiates the reference with ``torch.func.vjp``, traces that with
``make_fx`` into core aten operators (sizes that follow the inputs stay symbolic: read from the tensors at run time),
and writes a KernelBench problem file whose ``Model.forward`` is that trace:

    forward(<the forward's inputs>, <the module's state, state_dict order>, grad_0, ...) -> gradients

returning one gradient per floating-point input and parameter, in the order its ``GRADIENTS`` list names. Its
``get_inputs()`` runs the forward problem's own ``get_inputs()`` and constructor (the forward's source is embedded,
so the file stands alone; its size constants are this file's, so the verifier's reduced and second shapes apply),
plus one random incoming gradient per floating-point output. ``kernelwright optimize`` treats it as any problem:
the families claim the backward's reductions (a norm's row sums, a bias gradient's column sum), GEMMs and pointwise
chains, the verifier judges the result against float64, and ``kernelwright export`` registers it as the op's
backward.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

from kernelwright.errors import InputError
from kernelwright.generate.operators import RANDOM
from kernelwright.problem.files import import_from_path, read_problem

log = logging.getLogger(__name__)

_MAX_CONSTANT_ELEMENTS = 64
_MAX_OPERATORS = 2000
_FLOAT_CAST = re.compile(r"dtype = torch\.(float16|bfloat16|float32)\b")  # tensor constants of the trace become buffers of the backward Model; small ones only


@dataclass(frozen=True, kw_only=True)
class BackwardProblem:
    path: Path
    forward_sha256: str
    arguments: tuple[str, ...]  # the backward Model's forward parameters: inputs, state, incoming gradients
    gradients: tuple[str, ...]  # what it returns, in order: forward input names and state keys
    n_inputs: int  # how many of ``arguments`` are the forward's inputs (then state, then incoming gradients)
    n_state: int


def write_backward_problem(problem_path: str | Path, out: str | Path, *, seed: int = 0) -> BackwardProblem:
    """Write the backward problem of ``problem_path`` to ``out``. Raises :class:`InputError` (one line) when the
    reference has nothing to differentiate, is random, or does not trace."""
    import torch

    from kernelwright.problem.signature import forward_input_names, unique_identifiers

    problem = read_problem(problem_path)
    name = problem.path.name
    module = import_from_path(problem.path, "kernelwright_backward_of")
    torch.manual_seed(seed)
    init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
    torch.manual_seed(seed)
    model = module.Model(*init)
    torch.manual_seed(seed)
    inputs = list(module.get_inputs())
    state = dict(model.state_dict(keep_vars=True))
    params = {key for key, _ in model.named_parameters(remove_duplicate=False)}

    def is_float(v: Any) -> bool:
        return isinstance(v, torch.Tensor) and v.is_floating_point()

    wrt_inputs = [i for i, v in enumerate(inputs) if is_float(v)]
    wrt_state = [i for i, (k, v) in enumerate(state.items()) if k in params and is_float(v) and v.requires_grad]
    outputs = _outputs_of(model, inputs)
    flat = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    float_outputs = [i for i, o in enumerate(flat) if is_float(o)]
    if not float_outputs or not (wrt_inputs or wrt_state):
        raise InputError(f"problem {name}: nothing to differentiate (no floating-point output, or no floating-point "
                         "input or parameter); export it without a backward")

    keys = list(state)
    n_in, n_state = len(inputs), len(keys)

    def backward(*args: Any) -> tuple[Any, ...]:
        ins, st, grads = list(args[:n_in]), list(args[n_in:n_in + n_state]), args[n_in + n_state:]

        def function(*diff: Any) -> tuple[Any, ...]:
            full_in, full_st = list(ins), list(st)
            for i, value in zip(wrt_inputs, diff[:len(wrt_inputs)]):
                full_in[i] = value
            for i, value in zip(wrt_state, diff[len(wrt_inputs):]):
                full_st[i] = value
            out = torch.func.functional_call(model, dict(zip(keys, full_st)), tuple(full_in))
            items = list(out) if isinstance(out, (tuple, list)) else [out]
            return tuple(items[i] for i in float_outputs)

        with _OperatorBudget(_MAX_OPERATORS * 4):
            _, vjp = torch.func.vjp(function, *[ins[i] for i in wrt_inputs], *[st[i] for i in wrt_state])
            return tuple(vjp(tuple(grads)))

    torch.manual_seed(seed)
    incoming = [torch.randn(flat[i].shape, dtype=flat[i].dtype) for i in float_outputs]
    example = [*inputs, *[v.detach() for v in state.values()], *incoming]
    gm = _trace(backward, example, name)

    input_names = forward_input_names(module.Model, n_in)
    state_names = unique_identifiers([k.replace(".", "_") for k in keys], set(input_names))
    grad_names = unique_identifiers([f"grad_{i}" for i in range(len(incoming))], {*input_names, *state_names})
    arguments = [*input_names, *state_names, *grad_names]
    gradients = [input_names[i] for i in wrt_inputs] + [keys[i] for i in wrt_state]
    body, buffers = _body(gm, arguments, name)
    source = _source(problem, body, buffers, arguments, gradients)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(source)
    return BackwardProblem(path=out, forward_sha256=problem.sha256, arguments=tuple(arguments),
                           gradients=tuple(gradients), n_inputs=n_in, n_state=n_state)


def _outputs_of(model: Any, inputs: list[Any]) -> Any:
    """The forward's outputs, as meta tensors where every operator has a meta kernel (no arithmetic at full size)."""
    import copy

    import torch

    try:
        meta = copy.deepcopy(model).to("meta")
        with torch.no_grad():
            return meta(*[v.to("meta") if isinstance(v, torch.Tensor) else v for v in inputs])
    except (NotImplementedError, RuntimeError):
        with torch.no_grad():
            return model(*inputs)


def _trace(backward: Any, example: list[Any], name: str) -> Any:
    import torch
    import torch.fx.experimental._config as fx_config
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    try:
        # No duck sizing: two sizes that happen to be equal in the example (rows == dim) stay two symbols. SDPA as
        # its math form: the fused backends trace to device-specific operators (`..._for_cpu_backward` here).
        with fx_config.patch(use_duck_shape=False), sdpa_kernel([SDPBackend.MATH]):
            gm = make_fx(backward, decomposition_table=core_aten_decompositions(), tracing_mode="symbolic")(*example)
    except _TooLarge:
        raise InputError(f"problem {name}: its backward traces to more than {_MAX_OPERATORS * 4} operators (the "
                         "decomposition unrolls, as cumprod's does); it stays the reference's") from None
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        try:  # a fixed-shape trace often gets further (dropout's mask does not trace symbolically): say why
            _refuse_random(make_fx(backward, tracing_mode="fake")(*example), name)
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - the symbolic trace's error is the one to report
            pass
        raise InputError(f"problem {name}: its backward does not trace with make_fx ({type(exc).__name__}: "
                         f"{first[:200]}); export it with the reference's backward") from None
    _refuse_random(gm, name)
    for node in gm.graph.nodes:
        if node.op == "call_function" and "_for_cpu" in str(node.target):
            raise InputError(f"problem {name}: its backward traces to a CPU-only operator ({node.target}); it stays "
                             "the reference's")
    gm.graph.eliminate_dead_code()
    size = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    if size > _MAX_OPERATORS:  # cumprod's backward unrolls along the scanned dim (tens of thousands of operators)
        raise InputError(f"problem {name}: its backward traces to {size} operators (the decomposition unrolls); "
                         "it stays the reference's")
    # Returned values must be new tensors: the gradient of `a + b` is the incoming gradient itself, and two
    # arguments can share one gradient. Each repeat, and each argument returned as is, becomes a copy.
    output = next(n for n in gm.graph.nodes if n.op == "output")
    seen: set[Any] = set()
    values = list(output.args[0])
    with gm.graph.inserting_before(output):
        for i, value in enumerate(values):
            if value is None:
                continue
            if value.op == "placeholder" or value in seen:
                values[i] = gm.graph.call_function(torch.ops.aten.clone.default, (value,))
            seen.add(value)
    output.args = (tuple(values),)
    gm.recompile()
    return gm


class _TooLarge(Exception):
    pass


class _OperatorBudget(TorchDispatchMode):
    """Stops a trace that dispatches more than ``limit`` operators, before it takes minutes (cumprod's backward
    unrolls along the scanned dimension: 8192 steps of a dozen operators each)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit, self.count = limit, 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.count += 1
        if self.count > self.limit:
            raise _TooLarge
        return func(*args, **(kwargs or {}))


def _refuse_random(gm: Any, name: str) -> None:
    for node in gm.graph.nodes:
        if node.op == "call_function" and getattr(node.target, "_opname", None) in RANDOM:
            raise InputError(f"problem {name}: its forward is random ({node.target}); a backward cannot redraw the "
                             "forward's randomness, so it stays the reference's")


def _body(gm: Any, arguments: list[str], name: str) -> tuple[list[str], dict[str, Any]]:
    """The traced graph as the lines of a forward method (arguments renamed), and its tensor constants."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    taken = {n.name for n in gm.graph.nodes if n.op != "placeholder"}
    clash = taken & set(arguments)
    for node in gm.graph.nodes:  # graph values named like an argument move aside
        if node.name in clash:
            node.name = f"{node.name}_v"
    for node, argument in zip(placeholders, arguments):
        node.name = node.target = argument
    buffers = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            if value.numel() > _MAX_CONSTANT_ELEMENTS:
                raise InputError(f"problem {name}: its backward holds a {tuple(value.shape)} tensor constant; make "
                                 "it a buffer of Model")
            buffers[node.target] = value
    gm.recompile()
    lines = gm.code.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def forward("))
    body = [line[4:] if line.startswith("    ") else line for line in lines[start + 1:]]
    body = [line.replace("device(type='cpu')", "_device") for line in body if line.strip()]
    # The trace writes the forward's precision into its casts (fp32 math on fp16 tensors, then back). The verifier
    # also runs the reference in float64 to judge against the exact answer: there every float cast is to float64.
    body = [_FLOAT_CAST.sub(r"dtype = _dtype(torch.\1, _float64)", line) for line in body]
    tensors = [a for a, n in zip(arguments, placeholders) if "val" in n.meta and hasattr(n.meta["val"], "device")]
    floats = [a for a, n in zip(arguments, placeholders)
              if "val" in n.meta and getattr(n.meta["val"], "is_floating_point", lambda: False)()]
    if tensors:
        body.insert(0, f"_device = {tensors[0]}.device")
    body.insert(0, f"_float64 = {floats[0]}.dtype == torch.float64" if floats else "_float64 = False")
    return body, buffers


def _literal(value: Any) -> str:
    return f"torch.tensor({value.tolist()!r}, dtype={value.dtype})"


def _source(problem: Any, body: list[str], buffers: dict[str, Any], arguments: list[str],
            gradients: list[str]) -> str:
    sizes = dict(problem.size_globals)
    forward_source = problem.source
    embedded = (f'r"""{forward_source}"""' if '"""' not in forward_source and not forward_source.endswith("\\")
                else repr(forward_source))
    init = ["    def __init__(self):", "        super().__init__()"]
    init += [f"        self.register_buffer({k!r}, {_literal(v)})" for k, v in buffers.items()]
    digest = hashlib.sha256(forward_source.encode()).hexdigest()
    lines = [
        f'"""Backward of {problem.path.name}: gradients of its floating-point outputs with respect to',
        f"{', '.join(gradients)}.",
        "",
        "Written by kernelwright (kernelwright.generate.backward): the reference differentiated with torch.func.vjp",
        "and traced by make_fx into core aten operators. Model.forward takes the forward's inputs, then the module's",
        "state in state_dict order, then one incoming gradient per floating-point output, and returns the gradients",
        "in the order GRADIENTS names. get_inputs() runs the forward problem (embedded below, verbatim) at this",
        "file's sizes.",
        '"""',
        "",
        "from math import inf, nan  # the trace writes infinities and NaNs as these names",
        "",
        "import torch",
        "import torch.nn as nn",
        "",
        *(f"{k} = {v}" for k, v in sizes.items()),
        f"GRADIENTS = {gradients!r}",
        f"FORWARD_SHA256 = {digest!r}",
        "",
        "",
        "def _dtype(dtype, float64):",
        '    """The trace\'s cast target, or float64 when the verifier runs this reference in float64."""',
        "    return torch.float64 if float64 else dtype",
        "",
        "",
        "class Model(nn.Module):",
        *init,
        "",
        f"    def forward(self, {', '.join(arguments)}):",
        *(f"        {line}" for line in body),
        "",
        "",
        "def get_inputs():",
        "    forward = {'__name__': 'kernelwright_forward_problem'}",
        f"    exec(compile({embedded}, {problem.path.name!r}, 'exec'), forward)",
        f"    forward.update({{name: globals()[name] for name in {list(sizes)!r}}})",
        "    inputs = list(forward['get_inputs']())",
        "    model = forward['Model'](*forward['get_init_inputs']())",
        "    state = [value.detach().clone() for value in model.state_dict().values()]",
        "    try:  # output shapes without running the forward for real",
        "        model = model.to('meta')",
        "        outputs = model(*[v.to('meta') if isinstance(v, torch.Tensor) else v for v in inputs])",
        "    except (NotImplementedError, RuntimeError):",
        "        with torch.no_grad():",
        "            outputs = forward['Model'](*forward['get_init_inputs']())(*inputs)",
        "    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]",
        "    grads = [torch.randn(o.shape, dtype=o.dtype) for o in outputs if o.is_floating_point()]",
        "    return [*inputs, *state, *grads]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
    return "\n".join(lines)
