"""Symbolic sizes as Python: what a candidate's forward writes to compute a size of a dynamic capture from its
tensors (``x.size(1)``, ``a * b``, ``float(a)``) — the one catalogue of the size expressions the generator can write,
read by the emitter (the forward's lines) and by the families (which sizes a kernel may take as arguments)."""

from __future__ import annotations

import math
import operator
from typing import Any

from kernelwright.generate.graph import Ref, Symbol

_INFIX = {operator.mul: "*", operator.add: "+", operator.sub: "-", operator.floordiv: "//",
          operator.truediv: "/", operator.mod: "%", operator.pow: "**", operator.eq: "==", operator.ne: "!=",
          operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_SIZE_METHODS = {"sym_size": "size", "sym_stride": "stride", "sym_numel": "numel",
                 "sym_storage_offset": "storage_offset"}
_FUNCTIONS = {"sym_float": "float", "sym_int": "int", "sym_max": "max", "sym_min": "min", "sym_not": "not ",
              "ceil": "math.ceil", "floor": "math.floor", "sqrt": "math.sqrt"}


def _arg(value: Any) -> str:
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    return repr(value)


def python_of(symbol: Symbol) -> str | None:
    """Python for one symbolic size, from the tensors and the sizes before it; None for a target none of these
    forms writes."""
    target, args = symbol.target, symbol.args
    packet = getattr(getattr(target, "overloadpacket", None), "__name__", None)
    if packet in _SIZE_METHODS:
        rest = ", ".join(_arg(a) for a in args[1:])
        return f"{_arg(args[0])}.{_SIZE_METHODS[packet]}({rest})"
    if packet in ("_local_scalar_dense", "item"):  # a number the forward took, used as a number (a 0-d tensor here)
        return f"{_arg(args[0])}.item()"
    if target in _INFIX and len(args) == 2:
        return f"({_arg(args[0])} {_INFIX[target]} {_arg(args[1])})"
    if target is operator.neg:
        return f"(-{_arg(args[0])})"
    name = getattr(target, "__name__", "")
    if name in _FUNCTIONS:
        return f"{_FUNCTIONS[name]}({', '.join(_arg(a) for a in args)})"
    return None
