"""CUDA C++ expressions for the pointwise aten operators of an epilogue: the twin of :mod:`kernelwright.generate.expr`
(which writes Triton), for the kernels of the CUDA back end.

Values are scalars computed in fp32 (half inputs widened on load), one ``const float`` per node; an explicit
``_to_copy`` to a half type rounds there, as the reference does. NaN propagates as in PyTorch (``relu``,
``maximum`` and ``clamp`` keep a NaN input NaN). The libm calls are CUDA's accurate ones (``expf``, ``erff``,
``tanhf``: no ``--use_fast_math``). An operator or a use of one this table does not cover raises
:class:`~kernelwright.generate.expr.Unsupported`: the family then offers no CUDA configuration for the group (its
Triton ones still compete).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from kernelwright.generate.expr import PointwiseEmitter, Unsupported, Value, clamp_bounds, registrar
from kernelwright.generate.graph import Node, Ref
from kernelwright.generate.operators import ELEMENTWISE_COPIES

# Element types the CUDA kernels load and store, and how a value is widened to (narrowed from) fp32.
C_TYPE = {torch.float32: "float", torch.float16: "__half", torch.bfloat16: "__nv_bfloat16"}
TO_FLOAT = {torch.float32: "{}", torch.float16: "__half2float({})", torch.bfloat16: "__bfloat162float({})"}
FROM_FLOAT = {torch.float32: "{}", torch.float16: "__float2half_rn({})", torch.bfloat16: "__float2bfloat16_rn({})"}

# Device helpers the expressions call (NaN-propagating max and min), emitted once in a kernel's source.
HELPERS = """\
__host__ __device__ __forceinline__ float kw_nan_max(float a, float b) { return (a != a || b != b) ? NAN : fmaxf(a, b); }
__host__ __device__ __forceinline__ float kw_nan_min(float a, float b) { return (a != a || b != b) ? NAN : fminf(a, b); }"""


def literal(value: Any) -> Value:
    if isinstance(value, bool):
        return Value("true" if value else "false", torch.bool)
    if isinstance(value, int):
        return Value(f"{float(value)!r}f", torch.float32)  # an epilogue computes in fp32: 2 is 2.0f
    if isinstance(value, float):
        if math.isnan(value):
            return Value("NAN", torch.float32)
        if math.isinf(value):
            return Value("INFINITY" if value > 0 else "(-INFINITY)", torch.float32)
        return Value(f"{value!r}f", torch.float32)
    raise Unsupported(f"constant {value!r}")


def widen(load: str, dtype: torch.dtype) -> str:
    """``load`` (an element of ``dtype``) as fp32; Unsupported for a type the kernels do not read."""
    if dtype not in TO_FLOAT:
        raise Unsupported(f"a {dtype} operand in a CUDA epilogue")
    return TO_FLOAT[dtype].format(load)


def narrow(value: str, dtype: torch.dtype) -> str:
    """The fp32 ``value`` rounded to ``dtype`` for a store."""
    if dtype not in FROM_FLOAT:
        raise Unsupported(f"a {dtype} output of a CUDA epilogue")
    return FROM_FLOAT[dtype].format(value)


class CudaPointwiseEmitter(PointwiseEmitter):
    """Emits C++ statements for pointwise nodes, one ``const`` variable per node."""

    def _assign(self, node: Node, text: str, dtype: torch.dtype) -> Value:
        name = f"{self.prefix}_{node.name}"
        self.lines.append(f"const {'bool' if dtype == torch.bool else 'float'} {name} = {text};")
        return Value(name, dtype)

    def arg(self, value: Any, env: dict[str, Value]) -> Value:
        if not isinstance(value, Ref):
            return literal(value)
        found = super().arg(value, env)
        if found.dtype not in (torch.float32, torch.bool):
            raise Unsupported(f"a {found.dtype} value in a CUDA epilogue")
        return found


_Handler = Callable[[CudaPointwiseEmitter, Node, dict[str, Value]], Value]
CudaPointwiseEmitter.handlers = {}
_handles = registrar(CudaPointwiseEmitter.handlers)


def _floats(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value], n: int) -> list[str]:
    values = [e.arg(a, env) for a in node.args[:n]]
    if any(v.dtype != torch.float32 for v in values):
        raise Unsupported(f"aten.{node.op} of a boolean in a CUDA epilogue")
    return [v.expr for v in values]


def _number(value: Any) -> str:
    return literal(float(value)).expr


@_handles("add", "sub")
def _add_sub(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _floats(e, node, env, 2)
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
    rhs = b if alpha == 1 else f"({b} * {_number(alpha)})"
    return e._assign(node, f"{a} {'+' if node.op == 'add' else '-'} {rhs}", torch.float32)


@_handles("mul")
def _mul(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _floats(e, node, env, 2)
    return e._assign(node, f"{a} * {b}", torch.float32)


@_handles("div")
def _div(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    if node.kwargs.get("rounding_mode") is not None:
        raise Unsupported("div with a rounding mode")
    a, b = _floats(e, node, env, 2)
    return e._assign(node, f"{a} / {b}", torch.float32)


def _gelu(a: str, approximate: str) -> str:
    if approximate == "tanh":
        return f"0.5f * {a} * (1.0f + tanhf(0.7978845608028654f * ({a} + 0.044715f * {a} * {a} * {a})))"
    return f"0.5f * {a} * (1.0f + erff({a} * 0.7071067811865476f))"


_UNARY: dict[str, Callable[[str], str]] = {
    "exp": lambda a: f"expf({a})", "exp2": lambda a: f"exp2f({a})", "log": lambda a: f"logf({a})",
    "log2": lambda a: f"log2f({a})", "log1p": lambda a: f"log1pf({a})", "expm1": lambda a: f"expm1f({a})",
    "sqrt": lambda a: f"sqrtf({a})", "rsqrt": lambda a: f"rsqrtf({a})", "reciprocal": lambda a: f"1.0f / {a}",
    "tanh": lambda a: f"tanhf({a})", "sigmoid": lambda a: f"1.0f / (1.0f + expf(-{a}))",
    "erf": lambda a: f"erff({a})", "sin": lambda a: f"sinf({a})", "cos": lambda a: f"cosf({a})",
    "floor": lambda a: f"floorf({a})", "ceil": lambda a: f"ceilf({a})", "silu": lambda a: f"{a} / (1.0f + expf(-{a}))",
    "neg": lambda a: f"-{a}", "abs": lambda a: f"fabsf({a})",
    "relu": lambda a: f"({a} < 0.0f ? 0.0f : {a})",  # NaN < 0 is false: NaN stays NaN
}  # fmt: skip


@_handles(*_UNARY)
def _unary(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _floats(e, node, env, 1)
    return e._assign(node, _UNARY[node.op](a), torch.float32)


@_handles("gelu")
def _gelu_node(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _floats(e, node, env, 1)
    return e._assign(node, _gelu(a, node.kwargs.get("approximate", "none")), torch.float32)


@_handles("leaky_relu")
def _leaky(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _floats(e, node, env, 1)
    slope = node.args[1] if len(node.args) > 1 else node.kwargs.get("negative_slope", 0.01)
    return e._assign(node, f"({a} < 0.0f ? {a} * {_number(slope)} : {a})", torch.float32)


@_handles("elu")
def _elu(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _floats(e, node, env, 1)
    alpha = float(node.args[1]) if len(node.args) > 1 else float(node.kwargs.get("alpha", 1.0))
    scale = float(node.args[2]) if len(node.args) > 2 else float(node.kwargs.get("scale", 1.0))
    return e._assign(node, f"({a} > 0.0f ? {_number(scale)} * {a} : {_number(scale * alpha)} * expm1f({a}))",
                    torch.float32)


@_handles("softplus")
def _softplus(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _floats(e, node, env, 1)
    beta = _number(node.args[1] if len(node.args) > 1 else 1.0)
    threshold = _number(node.args[2] if len(node.args) > 2 else 20.0)
    return e._assign(node, f"({a} * {beta} > {threshold} ? {a} : log1pf(expf({a} * {beta})) / {beta})",
                    torch.float32)


@_handles("hardtanh", "clamp", "clamp_min", "clamp_max")
def _clamp(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    (a,) = _floats(e, node, env, 1)
    lo, hi = clamp_bounds(node)
    text = a
    if lo is not None:
        text = f"kw_nan_max({text}, {e.arg(lo, env).expr})"
    if hi is not None:
        text = f"kw_nan_min({text}, {e.arg(hi, env).expr})"
    return e._assign(node, text, torch.float32)


@_handles("maximum", "minimum", "fmax", "fmin")
def _max_min(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _floats(e, node, env, 2)
    fn = {"maximum": "kw_nan_max", "minimum": "kw_nan_min", "fmax": "fmaxf", "fmin": "fminf"}[node.op]
    return e._assign(node, f"{fn}({a}, {b})", torch.float32)


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@_handles(*_COMPARE)
def _compare(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a, b = _floats(e, node, env, 2)
    return e._assign(node, f"{a} {_COMPARE[node.op]} {b}", torch.bool)


@_handles("where")
def _where(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    c = e.arg(node.args[0], env)
    if c.dtype != torch.bool:
        raise Unsupported("where on a non-boolean condition in a CUDA epilogue")
    a, b = (e.arg(v, env) for v in node.args[1:3])
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        raise Unsupported("where of booleans in a CUDA epilogue")
    return e._assign(node, f"({c.expr} ? {a.expr} : {b.expr})", torch.float32)


@_handles("pow")
def _pow(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    exponent = node.args[1]
    if isinstance(node.args[0], (int, float)):
        raise Unsupported("pow with a scalar base")
    (a,) = _floats(e, node, env, 1)
    if isinstance(exponent, Ref):
        return e._assign(node, f"powf({a}, {e.arg(exponent, env).expr})", torch.float32)
    if exponent == 0.5:
        return e._assign(node, f"sqrtf({a})", torch.float32)
    if float(exponent).is_integer() and abs(exponent) <= 8:
        n = int(abs(exponent))
        product = " * ".join([a] * n) if n else "1.0f"
        return e._assign(node, f"1.0f / ({product})" if exponent < 0 else f"({product})", torch.float32)
    return e._assign(node, f"powf({a}, {_number(exponent)})", torch.float32)


@_handles(*sorted(ELEMENTWISE_COPIES))
def _to_copy(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    a = e.arg(node.args[0], env)
    target = node.kwargs.get("dtype") or (node.args[1] if node.op == "convert_element_type" else None)
    if target is None or target == torch.float32 and a.dtype == torch.float32:
        return e._assign(node, a.expr, a.dtype)
    if a.dtype != torch.float32 or target not in TO_FLOAT:
        raise Unsupported(f"conversion to {target} in a CUDA epilogue")
    # Round to the target type, keep computing in fp32 (the reference's next op would widen it again).
    return e._assign(node, widen(narrow(a.expr, target), target), torch.float32)


@_handles("scalar_tensor")
def _scalar_tensor(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    return e._assign(node, literal(node.args[0]).expr, torch.float32)


@_handles("full", "full_like")
def _full(e: CudaPointwiseEmitter, node: Node, env: dict[str, Value]) -> Value:
    return e._assign(node, literal(node.args[1]).expr, torch.float32)
