"""The reference as a graph: ``torch.export`` of the problem's ``Model`` on its own inputs, decomposed to core aten.

Capture runs the problem's code in this process (it is the user's own, trusted code; candidates never run here).
Export traces with fake tensors, so the problem's full sizes cost nothing. What the templates need is kept in a
small, inspectable form: every value's shape/dtype, the aten operator of every node, which placeholders are
parameters (and their ``state_dict`` names) and which are the forward's inputs, plus the source pieces of the problem
module from which a readable ``ModelNew`` file is built (its imports, constants and ``Model.__init__``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import logging
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelwright.errors import InputError, UnsupportedProblem
from kernelwright.generate import opaque, specialize
from kernelwright.generate.operators import NO_OPS
from kernelwright.problem.files import ProblemFile, import_from_path, read_problem

log = logging.getLogger(__name__)

@dataclass(frozen=True, kw_only=True)
class TensorInfo:
    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...]

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        expected, step = [], 1
        for size in reversed(self.shape):
            expected.append(step)
            step *= max(size, 1)
        return all(s == e or size == 1 for s, e, size in zip(self.stride, reversed(expected), self.shape))


@dataclass(frozen=True, kw_only=True)
class Node:
    """One aten call of the graph."""

    name: str
    op: str  # the overload packet's name: "add", "_softmax", "addmm", "getitem", ...
    target: Any  # the OpOverload (or operator.getitem)
    args: tuple[Any, ...]  # values are `Ref`s where they name another node or a placeholder
    kwargs: dict[str, Any]
    info: TensorInfo | None  # None for multi-output nodes (their getitems carry the infos)
    is_pointwise: bool
    is_view: bool
    # The arguments with sizes as symbols (Refs into ProblemGraph.symbols) where the capture was dynamic: what the
    # emitter writes for nodes left to PyTorch, so a reshape follows the run-time shape. Families read `args`,
    # where every size is the example's number.
    sym_args: tuple[Any, ...] | None = None
    sym_kwargs: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Symbol:
    """A size (or a number computed from sizes) of a dynamic capture: ``x.size(1)``, ``a * b``, ``float(a)``."""

    name: str
    target: Any  # aten.sym_size.int, operator.mul, torch.sym_float, ...
    args: tuple[Any, ...]  # Refs to tensors or other symbols, or numbers
    hint: Any  # its value for the example inputs


@dataclass(frozen=True)
class Ref:
    """A reference to a graph value (a node's result or a placeholder) inside another node's arguments."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(kw_only=True)
class ProblemGraph:
    problem: ProblemFile
    nodes: list[Node]
    values: dict[str, TensorInfo]  # every tensor value: placeholders and single-output nodes
    parameters: dict[str, str]  # placeholder -> state_dict key (parameters, buffers)
    inputs: list[str]  # the forward's tensor inputs, in order (placeholder names)
    input_positions: list[int]  # where each of them sits in the forward's argument list
    n_forward_args: int
    outputs: list[str]  # the graph's output values, in order: what it returns and what it writes back
    module_prelude: str  # imports and constants of the problem module, as source
    init_source: str  # Model.__init__ (and helpers the class defines), renamed to ModelNew
    # Model.forward as written, renamed _forward_as_written: what a ModelNew whose kernels assume the captured mode
    # (training-mode batch norm, dropout) runs in the other mode, so that .eval() computes what the reference does.
    forward_source: str = ""
    training: bool = True  # the module's mode when it was captured
    returns_tuple: bool  # forward returns a tuple/list (else one tensor)
    symbols: dict[str, Symbol] = field(default_factory=dict)  # sizes of a dynamic capture, in definition order
    dynamic: bool = False  # sizes were captured as symbols (else every size is a number)
    users: dict[str, list[str]] = field(default_factory=dict)
    # Values the forward writes back rather than returns, as (value, "buffer" or "input", state_dict key or input
    # name): a training-mode batch norm's running statistics, updated in place as PyTorch does.
    writes: tuple[tuple[str, str, str], ...] = ()
    # Small tensors the forward creates (`torch.tensor(self.value)`), by placeholder: written out in the candidate.
    constants: dict[str, torch.Tensor] = field(default_factory=dict)
    # Numbers the forward takes (a float scale), by placeholder: the candidate turns each into a 0-d tensor of this
    # dtype (fp32, as PyTorch computes with a number next to fp32 and half tensors; fp64 beside fp64 inputs).
    scalar_inputs: dict[str, torch.dtype] = field(default_factory=dict)
    # Module attributes whose values the graph holds as constants (generate/specialize.py), as (dotted path,
    # value): the candidate guards on them and runs the forward as written where one differs.
    specialized: tuple[tuple[str, Any], ...] = ()

    @property
    def returned(self) -> list[str]:
        """The values the forward returns, in order."""
        written = {w[0] for w in self.writes}
        return [o for o in self.outputs if o not in written]

    def node(self, name: str) -> Node:
        found = self.find(name)
        if found is None:
            raise KeyError(name)
        return found

    def find(self, name: str) -> Node | None:
        """The node named ``name``, or None (a placeholder, or no such value)."""
        index = self.__dict__.get("_index")
        if index is None or len(index) != len(self.nodes):  # built once per node list (graphs are not edited)
            index = self.__dict__["_index"] = {n.name: n for n in self.nodes}
        return index.get(name)

    def info(self, name: str) -> TensorInfo:
        return self.values[name]

    def consumers(self, name: str) -> list[Node]:
        return [self.node(n) for n in self.users.get(name, [])]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)


def _hint(value: Any) -> Any:
    """The example's number for a symbolic size (or the number itself)."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.hint
    return value


def _info(value: Any) -> TensorInfo | None:
    if isinstance(value, torch.Tensor):
        return TensorInfo(shape=tuple(int(_hint(s)) for s in value.shape), dtype=value.dtype,
                          stride=tuple(int(_hint(s)) for s in value.stride()))
    return None


def _convert(arg: Any, symbols: dict[str, Symbol] | None = None) -> Any:
    """Graph arguments as records: nodes become Refs; with ``symbols``, references to symbolic sizes become their
    example values (the static view templates match against)."""
    if isinstance(arg, torch.fx.Node):
        if symbols is not None and arg.name in symbols:
            return symbols[arg.name].hint
        return Ref(arg.name)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_convert(a, symbols) for a in arg)
    if isinstance(arg, dict):
        return {k: _convert(v, symbols) for k, v in arg.items()}
    return arg


# Recurrent layers stay one node each (their training-IR form): decomposed, a 6-layer, 512-step LSTM is an unrolled
# graph of tens of thousands of nodes whose symbolic-shape reasoning did not end in 400 s; whole, the recurrent
# family computes it as a scan over time, and a plan without that family leaves one call to PyTorch.
RECURRENT_OPS = ("lstm.input", "gru.input", "rnn_tanh.input", "rnn_relu.input")


def _decompositions() -> Any:
    table = torch.export.default_decompositions()
    for name in RECURRENT_OPS:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet), overload)
        if op in table:
            del table[op]
    return table


def _export(model: torch.nn.Module, args: list[Any]) -> tuple[Any, bool]:
    """torch.export with every dimension of every tensor input dynamic (so sizes stay symbols that follow the run-time
    shape), falling back to a static export when that cannot be traced."""
    from torch.export import Dim

    dynamic = tuple({d: Dim.AUTO for d in range(a.dim())} if isinstance(a, torch.Tensor) else None for a in args)
    recurrent = any(isinstance(m, torch.nn.RNNBase) for m in model.modules())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # export's own deprecation notices are not the user's business
        try:
            with opaque.recurrent_layers() if recurrent else contextlib.nullcontext():
                return (torch.export.export(model, tuple(args), dynamic_shapes=dynamic)
                        .run_decompositions(_decompositions()), True)
        except Exception as exc:
            log.info("dynamic export failed (%s: %s); exporting with static shapes", type(exc).__name__, exc)
        # Fresh tensors: the failed dynamic attempt leaves its marks on the inputs, and a static export of the same
        # tensors fails the same way (level 3 `19_MobileNetV1`, torch 2.13).
        fresh = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        return torch.export.export(model, fresh).run_decompositions(_decompositions()), False


def _model_source(problem: ProblemFile) -> tuple[str, str, str]:
    """The problem module's prelude (everything but Model, get_inputs, get_init_inputs), Model's class body
    without forward, renamed to ModelNew — so a generated candidate builds exactly the reference's parameters,
    in the same order, under the same seed — and Model.forward as written, renamed ``_forward_as_written``."""
    tree = ast.parse(problem.source)
    prelude: list[str] = []
    init = ""
    forward = ""
    for stmt in tree.body:
        segment = ast.get_source_segment(problem.source, stmt) or ""
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
            body = [s for s in stmt.body
                    if not (isinstance(s, ast.Expr) and isinstance(getattr(s, "value", None), ast.Constant))]
            lines = []
            source_lines = problem.source.splitlines()
            for s in body:
                # Whole source lines, from the first decorator: a one-line statement (`expansion = 1`) keeps its
                # indentation, which get_source_segment(padded=True) gives only to multi-line ones.
                first = min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))])
                text = "\n".join(source_lines[first - 1:s.end_lineno])
                text = text.replace("super(Model, self)", "super(ModelNew, self)")
                if isinstance(s, ast.FunctionDef) and s.name == "forward":
                    forward = re.sub(r"\bdef forward\(", "def _forward_as_written(", text, count=1)
                else:
                    lines.append(text)
            init = "\n".join(lines)
        elif isinstance(stmt, ast.FunctionDef) and stmt.name in ("get_inputs", "get_init_inputs"):
            continue
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            continue  # the problem's docstring
        else:
            prelude.append(segment)
    return "\n".join(prelude), init, forward


def _forward_must_run(name: str, model: torch.nn.Module, args: list) -> None:
    """Raise InputError when the problem's own forward fails on its own inputs: then the file needs fixing, and
    no generator would help (a user was told to try the LLM, 2026-12-01)."""
    try:
        with torch.no_grad():
            model(*args)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InputError(f"problem {name}: its forward raised {type(exc).__name__}: {first[:200]}; fix the problem "
                         "file") from None


def _instantiate(module: Any, seed: int, device: torch.device | None, *, name: str = ""
                 ) -> tuple[torch.nn.Module, list[Any]]:
    """``Model(*get_init_inputs())`` and ``get_inputs()`` under ``seed``, created on ``device`` (None: where the
    problem puts them). Raises InputError for a constructor that fails on real tensors (the problem's own fault)."""
    context = torch.device(device) if device is not None else contextlib.nullcontext()
    with context:
        torch.manual_seed(seed)
        init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
        torch.manual_seed(seed)
        try:
            model = module.Model(*init)
        except Exception as exc:
            if device is not None:
                raise
            raise InputError(f"problem {name}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from None
        torch.manual_seed(seed)
        args = list(module.get_inputs())
    if device is not None and not all(a.device == device for a in args if isinstance(a, torch.Tensor)):
        raise ValueError("get_inputs() placed a tensor on a device of its own")
    return model, args


# torch.export of a 6-layer, 512-step LSTM (KernelBench level 3) was still reasoning about symbolic shapes after
# 400 s (2026-12-01); a capture that long is a problem for another generator, said in one line.
CAPTURE_TIMEOUT_S = 180.0


# Problems whose inputs and weights are larger than this are captured on the meta device (shapes only): KernelBench's
# level 1 holds inputs of 4-64 GiB, which took minutes to create on the CPU (a 4 GiB hinge loss: 103 s) or did not
# fit. Smaller ones keep real tensors: a few operators' meta kernels choose other output strides than the CPU's
# (scaled_dot_product_attention's), and the templates follow the layout the reference produces.
REAL_CAPTURE_BYTES = 1 << 30


def _bytes(model: torch.nn.Module, args: Sequence[Any]) -> int:
    tensors = [*model.state_dict().values(), *(a for a in args if isinstance(a, torch.Tensor))]
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


MAX_INLINE_CONSTANT = 64  # elements: a tensor constant of the forward larger than this should be a buffer


class _CaptureTimeout(BaseException):  # not an Exception: no except clause of a capture swallows it
    pass


@contextlib.contextmanager
def _time_bound(seconds: float) -> Iterator[None]:
    """Raise _CaptureTimeout in the block after ``seconds`` (an interval timer: the main thread on POSIX only;
    elsewhere the block runs unbounded)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    active = [True]

    def expire(signum: int, frame: Any) -> None:
        if active[0]:
            raise _CaptureTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    # Again every 0.2 s after the first: a raise that lands where it is swallowed (a __del__ or weakref callback
    # during export's garbage, whose exceptions Python only prints) is made again. Once, the bound fired into such
    # a place under a loaded suite and the 20,000-step capture ran to its end.
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.2)
    try:
        yield
    finally:
        while True:  # disarm, even if the alarm fires in here (the block's own outcome stands)
            try:
                active[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                break
            except _CaptureTimeout:
                continue
        signal.signal(signal.SIGALRM, previous)


def _numbers_as_tensors(args: list[Any]) -> tuple[list[Any], dict[int, torch.dtype]]:
    """The forward's arguments with each number (``forward(self, A, s: float)``) as a 0-d tensor, and their dtypes
    by position: export would bake a number into the graph as a constant, and a candidate built from that graph would
    ignore the number it is given. A 0-d tensor computes as the number does (it does not promote a tensor's dtype);
    a float is fp32, as PyTorch computes with a number beside fp32 and half tensors (fp64 beside fp64 inputs)."""
    widest = torch.float64 if any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args) \
        else torch.float32
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    out, numbers = list(args), {}
    for i, a in enumerate(args):
        if isinstance(a, (bool, int, float)):
            numbers[i] = torch.bool if isinstance(a, bool) else torch.int64 if isinstance(a, int) else widest
            out[i] = torch.tensor(a, dtype=numbers[i], device=device)
    return out, numbers


@functools.cache
def _warm_export() -> None:
    """Export a one-operator module once a process, outside any time bound. The first export imports
    torch._dynamo, pieces of Inductor and Triton (seconds): a bound that fires inside one of those imports leaves the
    module half made for the rest of the process, and every later capture then fails (``module 'triton.language'
    has no attribute 'core'``), as in a suite whose first capture in a worker was the one that ran past its bound."""

    class _One(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    try:
        torch.export.export(_One(), (torch.zeros(2),))
    except Exception as exc:  # noqa: BLE001 - the real capture says what is wrong, with its own message
        log.info("warming torch.export failed: %s", exc)


def capture(problem_path: str | Path, *, seed: int = 0, size_overrides: Mapping[str, int] | None = None,
            timeout_s: float = CAPTURE_TIMEOUT_S) -> ProblemGraph:
    """Export the problem's reference (at ``size_overrides`` of its size constants, if given) and describe its
    graph. Raises :class:`InputError` (one line, naming what failed and what to do) when the reference cannot be
    captured, within ``timeout_s`` or at all."""
    problem = read_problem(problem_path)
    _warm_export()
    try:
        with _time_bound(timeout_s):
            return _capture(problem, seed, size_overrides)
    except _CaptureTimeout:
        raise UnsupportedProblem(f"problem {problem.path.name}: capturing its graph with torch.export took more than "
                         f"{timeout_s:.0f} s (a long unrolled loop?); use --generator llm for it") from None


def _capture(problem: ProblemFile, seed: int, size_overrides: Mapping[str, int] | None) -> ProblemGraph:
    from kernelwright.problem import sizes

    module = import_from_path(problem.path, "kernelwright_captured_problem")
    sizes.apply(module, size_overrides or {})
    try:  # shapes and dtypes are all a graph needs: a large problem is captured on the meta device
        model, args = _instantiate(module, seed, torch.device("meta"))
        plain_args = args
        args, numbers = _numbers_as_tensors(args)
        if _bytes(model, args) <= REAL_CAPTURE_BYTES:
            raise ValueError("small enough to capture with real tensors")
        exported, dynamic = _export(model, args)
        if any(isinstance(c, torch.Tensor) and c.is_meta for c in exported.constants.values()):
            raise ValueError("the forward makes tensor constants, whose values meta tensors do not hold")
    except Exception as exc:  # small; an operator without a meta kernel; a data-dependent forward: real tensors
        log.info("capturing with real tensors (%s: %s)", type(exc).__name__, exc)
        model, args = _instantiate(module, seed, None, name=problem.path.name)
        plain_args = args
        args, numbers = _numbers_as_tensors(args)
        try:
            exported, dynamic = _export(model, args)
        except Exception as exc:
            _forward_must_run(problem.path.name, model, args)  # a broken problem is the problem's fault
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise UnsupportedProblem(f"problem {problem.path.name}: its graph cannot be captured with torch.export "
                             f"({type(exc).__name__}: {first[:200]}); use --generator llm for such problems") from None

    signature = exported.graph_signature
    parameters: dict[str, str] = {}
    constants: dict[str, torch.Tensor] = {}
    user_inputs: list[str] = []
    for spec in signature.input_specs:
        kind = spec.kind.name
        if kind in ("PARAMETER", "BUFFER"):
            parameters[spec.arg.name] = spec.target
        elif kind == "CONSTANT_TENSOR":  # `torch.tensor(self.value)` in forward: a small one is written out
            value = exported.constants.get(spec.target)
            if not isinstance(value, torch.Tensor) or value.numel() > MAX_INLINE_CONSTANT:
                raise InputError(f"problem {problem.path.name}: its forward creates a tensor constant "
                                 f"({spec.target}); register it as a buffer in __init__ so templates can read it")
            constants[spec.arg.name] = value.detach().cpu().clone()
        elif kind == "USER_INPUT" and hasattr(spec.arg, "name"):
            user_inputs.append(spec.arg.name)
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    if len(positions) != len(user_inputs):
        raise InputError(f"problem {problem.path.name}: the exported graph takes {len(user_inputs)} tensor "
                         f"inputs but get_inputs() returns {len(positions)} tensors; non-tensor inputs that change "
                         "the graph are not supported by the templates")
    scalar_inputs = {user_inputs[positions.index(i)]: dtype for i, dtype in numbers.items()}

    values: dict[str, TensorInfo] = {}
    nodes: list[Node] = []
    outputs: list[str] = []
    symbols: dict[str, Symbol] = {}
    for fx_node in exported.graph_module.graph.nodes:
        if fx_node.op == "placeholder":
            info = _info(fx_node.meta.get("val"))
            if info is not None:
                values[fx_node.name] = info
        elif fx_node.op == "call_function":
            target = opaque.aten_target(fx_node.target)
            op = getattr(getattr(target, "overloadpacket", None), "__name__", getattr(target, "__name__", str(target)))
            if op in NO_OPS:
                continue
            val = fx_node.meta.get("val")
            if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)):
                symbols[fx_node.name] = Symbol(name=fx_node.name, target=target,
                                               args=tuple(_convert(a) for a in fx_node.args), hint=_hint(val))
                continue
            tags = getattr(target, "tags", ())
            info = _info(val)
            if info is not None:
                values[fx_node.name] = info
            static_args = tuple(_convert(a, symbols) for a in fx_node.args)
            static_kwargs = {k: _convert(v, symbols) for k, v in fx_node.kwargs.items()}
            symbolic_args = tuple(_convert(a) for a in fx_node.args)
            symbolic_kwargs = {k: _convert(v) for k, v in fx_node.kwargs.items()}
            nodes.append(Node(
                name=fx_node.name,
                op=op,
                target=target,
                args=static_args,
                kwargs=static_kwargs,
                info=info,
                is_pointwise=torch.Tag.pointwise in tags,
                is_view=bool(getattr(target, "is_view", False)),
                sym_args=symbolic_args if symbolic_args != static_args else None,
                sym_kwargs=symbolic_kwargs if symbolic_kwargs != static_kwargs else None,
            ))
        elif fx_node.op == "output":
            outputs = [a.name for a in fx_node.args[0] if isinstance(a, torch.fx.Node)]
    writes = tuple((spec.arg.name, "buffer" if spec.kind.name == "BUFFER_MUTATION" else "input", spec.target)
                   for spec in signature.output_specs
                   if spec.kind.name in ("BUFFER_MUTATION", "USER_INPUT_MUTATION") and hasattr(spec.arg, "name"))
    prelude, init_source, forward_source = _model_source(problem)
    out_spec = getattr(exported.call_spec, "out_spec", None)
    returns_tuple = bool(out_spec is not None and getattr(out_spec, "type", None) in (tuple, list))
    graph = ProblemGraph(problem=problem, nodes=nodes, values=values, parameters=parameters, inputs=user_inputs,
                         input_positions=positions, n_forward_args=len(args), outputs=outputs,
                         module_prelude=prelude, init_source=init_source, forward_source=forward_source,
                         training=model.training, returns_tuple=returns_tuple,
                         symbols=symbols, dynamic=dynamic, writes=writes, constants=constants,
                         scalar_inputs=scalar_inputs)
    graph.users = _users(nodes)
    if forward_source:  # without the forward as written there is nothing to fall back on
        static_inputs = set() if dynamic else {d for name in user_inputs if name in values
                                                 for d in values[name].shape}
        graph.specialized = specialize.specialized_attributes(
            model, specialize.graph_literals(nodes, symbols.values()), static_inputs)
    if numbers:
        _same_dtypes_with_numbers(problem.path.name, model, plain_args, graph)
    return graph


def _same_dtypes_with_numbers(name: str, model: torch.nn.Module, plain_args: list[Any], graph: ProblemGraph) -> None:
    """Raise InputError where a number the forward takes, captured as a 0-d tensor, changed a result's dtype: two
    0-d operands promote as tensors do (an fp16 sum times 0.5 becomes fp32), where a number would not."""
    with torch.no_grad():
        out = model(*plain_args)
    outs = out if isinstance(out, (tuple, list)) else [out]
    expected = [o.dtype for o in outs if isinstance(o, torch.Tensor)]
    got = [graph.info(o).dtype for o in graph.returned]
    if expected != got:
        raise InputError(f"problem {name}: a number its forward takes changes the result's dtype when captured as a "
                         f"tensor ({', '.join(map(str, got))} instead of {', '.join(map(str, expected))}); pass it "
                         "as a tensor in get_inputs, or use --generator llm")


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, Ref):
        yield value.name
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs(v)


def node_inputs(node: Node) -> list[str]:
    """Names of the values a node reads, in argument order, without repeats."""
    seen: list[str] = []
    for name in _refs((node.args, node.kwargs)):
        if name not in seen:
            seen.append(name)
    return seen


def _users(nodes: Sequence[Node]) -> dict[str, list[str]]:
    users: dict[str, list[str]] = {}
    for node in nodes:
        for name in node_inputs(node):
            users.setdefault(name, []).append(node.name)
    return users
