"""Triton expressions for pointwise aten operators — shared by every template's prologue and epilogue.

:class:`PointwiseEmitter` turns a chain of pointwise graph nodes into Triton statements over variables that hold
blocks of values. Floating values are computed in fp32 (half types are widened on load, as PyTorch's CUDA kernels
do internally); an explicit ``_to_copy`` to a narrower type rounds there, as the reference does. NaN propagates as
in PyTorch: ``relu``, ``maximum``, ``clamp`` keep a NaN input NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.generate.graph import Node, Ref
from kernelwright.generate.operators import ELEMENTWISE_COPIES

TL_DTYPE = {
    torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16",
    torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}  # fmt: skip


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic happens in: fp32 for every floating type narrower than fp64."""
    if dtype.is_floating_point and dtype != torch.float64:
        return torch.float32
    return dtype


@dataclass(frozen=True)
class Value:
    """A Triton expression (a variable name or a literal) and the dtype it holds."""

    expr: str
    dtype: torch.dtype


class Unsupported(Exception):  # noqa: N818 - a control-flow signal, not an error for users
    """The operator (or this use of it) has no Triton expression here; the node stays in PyTorch."""


def literal(value: Any) -> Value:
    if isinstance(value, bool):
        return Value("True" if value else "False", torch.bool)
    if isinstance(value, int):
        return Value(repr(value), torch.int64)
    if isinstance(value, float):
        if math.isnan(value):
            return Value('float("nan")', torch.float32)
        if math.isinf(value):
            return Value('float("inf")' if value > 0 else '-float("inf")', torch.float32)
        return Value(repr(value), torch.float32)
    raise Unsupported(f"constant {value!r}")


def _promote(*values: Value) -> torch.dtype:
    floats = [v.dtype for v in values if v.dtype.is_floating_point]
    if floats:
        return torch.float64 if torch.float64 in floats else torch.float32
    ints = [v.dtype for v in values if v.dtype != torch.bool]
    return torch.int64 if ints else torch.bool


def _nan_max(a: str, b: str) -> str:
    return f"tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


def _nan_min(a: str, b: str) -> str:
    return f"tl.minimum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


# Transcendentals are written with triton.language primitives only: libdevice calls do not run under the Triton
# interpreter (triton 3.6 and 3.9 return None for them), and a kernel must be the same code on the CPU and the GPU.
def _tanh(a: str) -> str:
    # (1 - e^-2|x|) / (1 + e^-2|x|) with the sign restored; a short series below 1/16, where the difference
    # would cancel (the first omitted term is under 4e-13 there).
    small = f"{a} * (1.0 + {a} * {a} * (-0.3333333333333333 + {a} * {a} * (0.13333333333333333 - " \
            f"0.05396825396825397 * {a} * {a})))"
    t = f"tl.exp(-2.0 * tl.abs({a}))"
    big = f"tl.where({a} < 0, -1.0, 1.0) * (1.0 - {t}) / (1.0 + {t})"
    return f"tl.where(tl.abs({a}) < 0.0625, {small}, {big})"


def _log1p(a: str) -> str:
    # Goldberg: log(u) * x / (u - 1) with u = 1 + x is accurate to a few ulps where log(1 + x) is not.
    return f"tl.where(1.0 + {a} == 1.0, {a}, tl.log(1.0 + {a}) * ({a} / ((1.0 + {a}) - 1.0)))"


def _expm1(a: str) -> str:
    # Kahan: (u - 1) * x / log(u) with u = e^x.
    u = f"tl.exp({a})"
    return (f"tl.where({u} == 1.0, {a}, tl.where({u} - 1.0 == -1.0, -1.0, "
            f"({u} - 1.0) * {a} / tl.log({u})))")


def _gelu(a: str, approximate: str) -> str:
    if approximate == "tanh":
        return f"0.5 * {a} * (1.0 + {_tanh(f'(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a}))')})"
    return f"0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476))"


def _pow(a: Value, exponent: Any) -> str:
    if not isinstance(exponent, (int, float)):
        raise Unsupported("pow with a tensor exponent")
    x = a.expr
    special = {0.5: f"tl.sqrt_rn({x})", -0.5: f"tl.rsqrt({x})"}
    if exponent in special:
        return special[exponent]
    if float(exponent).is_integer() and abs(exponent) <= 8:
        n = int(abs(exponent))
        product = " * ".join([x] * n) if n else "1.0"
        return f"1.0 / ({product})" if exponent < 0 else f"({product})"
    # x ** y = exp(y log x): NaN for a negative base, 0 or inf at 0 — as torch.pow gives for a fractional y.
    return f"tl.exp({float(exponent)!r} * tl.log({x}))"


class PointwiseEmitter:
    """Emits Triton statements for pointwise nodes, one variable per node. A subclass writing another language
    (the CUDA back end's C++) sets its own ``handlers`` table, filled with :func:`registrar`."""

    handlers: dict[str, Any] = {}  # this module's table, set below

    def __init__(self, prefix: str = "v") -> None:
        self.lines: list[str] = []
        self.prefix = prefix

    def _assign(self, node: Node, expr: str, dtype: torch.dtype) -> Value:
        name = f"{self.prefix}_{node.name}"
        self.lines.append(f"{name} = {expr}")
        return Value(name, dtype)

    def arg(self, value: Any, env: dict[str, Value]) -> Value:
        if isinstance(value, Ref):
            if value.name not in env:
                raise Unsupported(f"value {value.name} is not available in the kernel")
            return env[value.name]
        return literal(value)

    def emit(self, node: Node, env: dict[str, Value]) -> Value:
        handler = self.handlers.get(node.op)
        if handler is None:
            raise Unsupported(f"aten.{node.op}")
        return handler(self, node, env)

    def emit_all(self, nodes: Iterable[Node], env: dict[str, Value]) -> dict[str, Value]:
        for node in nodes:
            env[node.name] = self.emit(node, env)
        return env


def supported(node: Node) -> bool:
    """Whether :class:`PointwiseEmitter` has an expression for this node (it may still reject the arguments)."""
    return node.op in _HANDLERS


_Handler = Callable[[PointwiseEmitter, Node, dict[str, Value]], Value]
_HANDLERS: dict[str, _Handler] = {}
PointwiseEmitter.handlers = _HANDLERS


def registrar(table: dict[str, Any]) -> Callable[..., Callable[[_Handler], _Handler]]:
    """``@handles("add", "sub")``: a decorator entering a handler in ``table`` under each aten name."""

    def handles(*ops: str) -> Callable[[_Handler], _Handler]:
        def register(fn: _Handler) -> _Handler:
            for op in ops:
                table[op] = fn
            return fn

        return register

    return handles


_handles = registrar(_HANDLERS)


def _args(e: PointwiseEmitter, node: Node, env: dict[str, Value], n: int) -> list[Value]:
    return [e.arg(a, env) for a in node.args[:n]]


@_handles("add", "sub")
def _add_sub(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _args(e, node, env, 2)
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
    rhs = b.expr if alpha == 1 else f"({b.expr} * {alpha!r})"
    sign = "+" if node.op == "add" else "-"
    return e._assign(node, f"{a.expr} {sign} {rhs}", _promote(a, b))


@_handles("mul")
def _mul(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _args(e, node, env, 2)
    return e._assign(node, f"{a.expr} * {b.expr}", _promote(a, b))


@_handles("div")
def _div(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    if node.kwargs.get("rounding_mode") not in (None,):
        raise Unsupported("div with a rounding mode")
    a, b = _args(e, node, env, 2)
    if not a.dtype.is_floating_point and not b.dtype.is_floating_point:
        return e._assign(node, f"{a.expr}.to(tl.float32) / {b.expr}", torch.float32)
    return e._assign(node, f"{a.expr} / {b.expr}", _promote(a, b, Value("", torch.float32)))


@_handles("addcmul")
def _addcmul(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b, c = _args(e, node, env, 3)
    value = node.kwargs.get("value", 1)
    return e._assign(node, f"{a.expr} + {value!r} * {b.expr} * {c.expr}", _promote(a, b, c))


_UNARY_FLOAT: dict[str, Callable[[str], str]] = {
    "exp": lambda a: f"tl.exp({a})", "exp2": lambda a: f"tl.exp2({a})", "log": lambda a: f"tl.log({a})",
    "log2": lambda a: f"tl.log2({a})", "log1p": _log1p, "expm1": _expm1, "sqrt": lambda a: f"tl.sqrt_rn({a})",
    "rsqrt": lambda a: f"tl.rsqrt({a})", "reciprocal": lambda a: f"1.0 / {a}", "tanh": _tanh,
    "sigmoid": lambda a: f"tl.sigmoid({a})", "erf": lambda a: f"tl.erf({a})", "sin": lambda a: f"tl.sin({a})",
    "cos": lambda a: f"tl.cos({a})", "floor": lambda a: f"tl.floor({a})", "ceil": lambda a: f"tl.ceil({a})",
    "silu": lambda a: f"{a} * tl.sigmoid({a})",
}  # fmt: skip


@_handles(*_UNARY_FLOAT)
def _unary_float(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    expr = a.expr if a.dtype.is_floating_point else f"{a.expr}.to(tl.float32)"
    return e._assign(node, _UNARY_FLOAT[node.op](expr), torch.float32 if a.dtype != torch.float64
                     else torch.float64)


@_handles("neg")
def _neg(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    return e._assign(node, f"-{a.expr}", a.dtype)


@_handles("abs")
def _abs(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    return e._assign(node, f"tl.abs({a.expr})", a.dtype)


@_handles("relu")
def _relu(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    return e._assign(node, f"tl.where({a.expr} < 0, 0, {a.expr})", a.dtype)  # NaN stays NaN


@_handles("gelu")
def _gelu_node(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    return e._assign(node, _gelu(a.expr, node.kwargs.get("approximate", "none")), torch.float32)


@_handles("leaky_relu")
def _leaky(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    slope = node.args[1] if len(node.args) > 1 else node.kwargs.get("negative_slope", 0.01)
    return e._assign(node, f"tl.where({a.expr} < 0, {a.expr} * {float(slope)!r}, {a.expr})", a.dtype)


@_handles("elu")
def _elu(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    alpha = float(node.args[1]) if len(node.args) > 1 else float(node.kwargs.get("alpha", 1.0))
    scale = float(node.args[2]) if len(node.args) > 2 else float(node.kwargs.get("scale", 1.0))
    return e._assign(node, f"tl.where({a.expr} > 0, {scale!r} * {a.expr}, "
                           f"{scale * alpha!r} * ({_expm1(a.expr)}))", torch.float32)


@_handles("softplus")
def _softplus(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    beta = float(node.args[1]) if len(node.args) > 1 else 1.0
    threshold = float(node.args[2]) if len(node.args) > 2 else 20.0
    return e._assign(node, f"tl.where({a.expr} * {beta!r} > {threshold!r}, {a.expr}, "
                           f"({_log1p(f'tl.exp({a.expr} * {beta!r})')}) / {beta!r})", torch.float32)


def clamp_bounds(node: Node) -> tuple[Any, Any]:
    """(low, high) of a hardtanh/clamp/clamp_min/clamp_max node, None for a side without a bound."""
    if node.op == "clamp_min":
        return node.args[1], None
    if node.op == "clamp_max":
        return None, node.args[1]
    default = (-1.0, 1.0) if node.op == "hardtanh" else (None, None)
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min", default[0])
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max", default[1])
    return lo, hi


@_handles("hardtanh", "clamp", "clamp_min", "clamp_max")
def _clamp(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    lo, hi = clamp_bounds(node)
    expr = a.expr
    if lo is not None:
        expr = _nan_max(expr, e.arg(lo, env).expr)
    if hi is not None:
        expr = _nan_min(expr, e.arg(hi, env).expr)
    return e._assign(node, expr, a.dtype)


@_handles("maximum", "minimum", "fmax", "fmin")
def _max_min(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _args(e, node, env, 2)
    if node.op in ("fmax", "fmin"):
        fn = "tl.maximum" if node.op == "fmax" else "tl.minimum"
        return e._assign(node, f"{fn}({a.expr}, {b.expr})", _promote(a, b))
    fn = _nan_max if node.op == "maximum" else _nan_min
    return e._assign(node, fn(a.expr, b.expr), _promote(a, b))


@_handles("where")
def _where(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    c, a, b = _args(e, node, env, 3)
    return e._assign(node, f"tl.where({c.expr}, {a.expr}, {b.expr})", _promote(a, b))


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@_handles(*_COMPARE)
def _compare(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _args(e, node, env, 2)
    return e._assign(node, f"{a.expr} {_COMPARE[node.op]} {b.expr}", torch.bool)


@_handles("logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_not")
def _logical(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    if node.op in ("logical_not", "bitwise_not"):
        (a,) = _args(e, node, env, 1)
        if node.op == "bitwise_not" and a.dtype != torch.bool:
            return e._assign(node, f"~{a.expr}", a.dtype)
        return e._assign(node, f"{a.expr} == 0", torch.bool)
    a, b = _args(e, node, env, 2)
    op = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}[node.op]
    return e._assign(node, f"({a.expr} != 0) {op} ({b.expr} != 0)", torch.bool)


@_handles("isnan", "isinf")
def _isnan(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    expr = f"{a.expr} != {a.expr}" if node.op == "isnan" else f"tl.abs({a.expr}) == float(\"inf\")"
    return e._assign(node, expr, torch.bool)


@_handles("sign")
def _sign(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    return e._assign(node, f"tl.where({a.expr} > 0, 1.0, tl.where({a.expr} < 0, -1.0, {a.expr} * 0.0))", a.dtype)


@_handles("pow")
def _pow_node(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a = e.arg(node.args[0], env)
    exponent = node.args[1]
    if isinstance(exponent, Ref):
        b = e.arg(exponent, env)
        return e._assign(node, f"tl.exp({b.expr} * tl.log({a.expr}))", torch.float32)
    if isinstance(node.args[0], (int, float)):  # pow.Scalar: number ** tensor
        raise Unsupported("pow with a scalar base")
    expr = a.expr if a.dtype.is_floating_point else f"{a.expr}.to(tl.float32)"
    return e._assign(node, _pow(Value(expr, torch.float32), exponent), torch.float32)


@_handles(*sorted(ELEMENTWISE_COPIES))
def _to_copy(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _args(e, node, env, 1)
    target = node.kwargs.get("dtype") or (node.args[1] if node.op == "convert_element_type" else None)
    if target is None or target == a.dtype:
        return e._assign(node, a.expr, a.dtype)
    if target not in TL_DTYPE:
        raise Unsupported(f"conversion to {target}")
    if target.is_floating_point:
        # Round to the target type, keep computing in fp32 (as the reference's next op would widen it again).
        rounded = f"{a.expr}.to({TL_DTYPE[target]})"
        cdt = compute_dtype(target)
        return e._assign(node, rounded if cdt == target else f"{rounded}.to({TL_DTYPE[cdt]})", cdt)
    if target == torch.bool:
        return e._assign(node, f"{a.expr} != 0", torch.bool)
    return e._assign(node, f"{a.expr}.to({TL_DTYPE[target]})", target)


@_handles("scalar_tensor")
def _scalar_tensor(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    value = node.args[0]
    lit = literal(value)
    dtype = node.kwargs.get("dtype") or (node.info.dtype if node.info else lit.dtype)
    return e._assign(node, lit.expr, compute_dtype(dtype))


@_handles("full", "full_like")
def _full(e: PointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    lit = literal(node.args[1])
    dtype = node.kwargs.get("dtype") or (node.info.dtype if node.info else lit.dtype)
    return e._assign(node, lit.expr, compute_dtype(dtype))
