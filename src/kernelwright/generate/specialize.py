"""The module attributes a generated candidate is specialised on, and the guard that keeps it correct without them.

``torch.export`` bakes the numbers a forward reads from its modules into the graph: GroupNorm's ``num_groups`` and
``eps``, Hardtanh's bounds, a pooling window, a problem's own ``self.scaling_factor``. The kernels written from that
graph hold them as constants, so a ``ModelNew`` built with other constructor arguments (``num_groups=8``), or whose
attribute is changed afterwards, would compute something else than the reference (issue 15, defect 2). What a
compiler does with such values is specialise and guard: the candidate compares the attributes with the values its
kernels were written for on every call, and where one differs it runs the forward as written (PyTorch), with a
warning, so it still computes what the reference computes.

Which attributes: every number, string or truth value (or tuple of them) held by the model or a submodule, outside
``training`` and private names, that the graph uses as a literal — its value appears among the nodes' arguments.
The model's own numbers are guarded whether or not they appear (``x * (1 + self.alpha)`` bakes a derived value).
An integer that is also a dimension (above 1) of the module's own parameters and buffers (export keeps those static,
so they are literals too), of any weight for a module holding none (the model, a pooling layer), or, in a static
capture, of an input, is taken for a size: the kernels read sizes from the tensors (the verifier's second-shape trial
checks that), and guarding it would turn every other size into a fall-back. A stride equal to its convolution's
kernel size is therefore not guarded (the price of the rule).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

Scalar = int | float | bool | str | None


def _scalars(value: Any) -> list[Scalar] | None:
    """The plain values of an attribute (a tuple's elements), or None when it is not made of plain values."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return [value]
    if isinstance(value, (tuple, list)) and value and all(
            v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return None


def _key(value: Any) -> tuple[type, Any]:
    """A literal with its type: ``True`` is not the integer 1, nor 1.0 the integer 1 (a bool flag of every
    convolution would otherwise match any 1 in the graph)."""
    kind = bool if isinstance(value, bool) else int if isinstance(value, int) else float if isinstance(
        value, float) else str
    return kind, value


def _literals(arguments: Iterable[Any], into: set[Any]) -> None:
    for a in arguments:
        if isinstance(a, (list, tuple)):
            _literals(a, into)
        elif isinstance(a, dict):
            _literals(a.values(), into)
        elif isinstance(a, (bool, int, float, str)) and not (isinstance(a, float) and math.isnan(a)):
            into.add(_key(a))


def keyed(values: Iterable[Any]) -> set[tuple[type, Any]]:
    """Literals as :func:`specialized_attributes` takes them (each with its type)."""
    found: set[Any] = set()
    _literals(values, found)
    return found


def graph_literals(nodes: Iterable[Any], symbols: Iterable[Any]) -> set[Any]:
    """The numbers and strings the graph's nodes take as arguments, each with its type (sizes of a dynamic capture
    are symbols, not literals, and are not among them)."""
    found: set[Any] = set()
    for node in nodes:
        _literals(node.sym_args if node.sym_args is not None else node.args, found)
        _literals((node.sym_kwargs if node.sym_kwargs is not None else node.kwargs).values(), found)
    for symbol in symbols:
        _literals(symbol.args, found)
    return found


def _dimensions(tensors: Iterable[torch.Tensor]) -> set[int]:
    return {d for t in tensors for d in t.shape if d > 1}  # 0 and 1 are no sizes anything is generic over


def specialized_attributes(model: torch.nn.Module, literals: set[Any], input_dimensions: set[int] = frozenset()
                           ) -> tuple[tuple[str, Any], ...]:
    """(dotted attribute path, value) of every attribute the graph's constants may come from, in module order.

    ``input_dimensions``: the inputs' sizes where the capture is static (a dynamic one holds them as symbols)."""
    inputs = {d for d in input_dimensions if d > 1}
    everywhere = _dimensions([*model.parameters(), *model.buffers()]) | inputs
    chosen: list[tuple[str, Any]] = []
    for prefix, module in model.named_modules():
        own = module is model
        held = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        # A module's sizes are the dimensions of its own weights (Linear's in_features, a convolution's kernel);
        # the model's own numbers may be any weight's (its constructor passes them on). A submodule without weights
        # (a pooling layer, an upsampling) holds no size: its window is structure, whatever weight it equals.
        dimensions = everywhere if own else _dimensions(held) | inputs
        for name, value in vars(module).items():
            if name.startswith("_") or name in ("training", "inplace"):  # inplace changes no result
                continue
            parts = _scalars(value)
            if parts is not None and any(_baked(v, own, literals, dimensions) for v in parts):
                chosen.append((f"{prefix}.{name}" if prefix else name, value))
    return tuple(chosen)


def _baked(value: Scalar, own: bool, literals: set[Any], dimensions: set[int]) -> bool:
    if isinstance(value, int) and not isinstance(value, bool) and value in dimensions:
        return False  # a size: read from the tensors
    if own and isinstance(value, (float, bool, str)):
        return True  # the problem's own setting, maybe used through arithmetic
    return value is not None and _key(value) in literals


def guard_lines(attributes: tuple[tuple[str, Any], ...], forward_args: list[str]) -> list[str]:
    """The forward's first lines: run the forward as written when an attribute is not the captured value."""
    if not attributes:
        return []
    return ["if _kw_attributes(self) != _KW_SPECIALIZED:  # the kernels hold these values as constants",
            "    warnings.warn('ModelNew: a module attribute differs from the value its kernels were written for "
            "(_KW_SPECIALIZED); '",
            "                  'running the forward as written (PyTorch)', stacklevel=2)",
            f"    return self._forward_as_written({', '.join(forward_args)})"]


def _source(value: Any) -> str:
    """``value`` as Python source (``repr`` writes infinities and NaN as names no module defines)."""
    if isinstance(value, bool):
        return repr(bool(value))
    if isinstance(value, int):  # an IntEnum or a numpy integer: their repr is no literal
        return repr(int(value))
    if isinstance(value, float):
        value = float(value)  # numpy's float64 repr is np.float64(0.5)
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_source(v) for v in value)
        return f"({inner},)" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)


def guard_constant(attributes: tuple[tuple[str, Any], ...]) -> str:
    """The module-level tuple the guard compares with, one value an attribute, each named in a comment."""
    if not attributes:
        return ""
    lines = ["# Values of the module's attributes that the kernels below were written for (captured from the",
             "# reference); ModelNew runs the forward as written when one of them differs.",
             "_KW_SPECIALIZED = ("]
    lines += [f"    {_source(value)},  # {path}" for path, value in attributes]
    lines.append(")")
    lines.append(f"_KW_PATHS = ({', '.join(repr(path) for path, _ in attributes)},)")
    lines += [
        "",
        "",
        "def _kw_attributes(model):",
        '    """The guarded attributes\' values now. Their owners (submodules) are found once per model and kept: a',
        "    dotted lookup through nn.Module costs microseconds an attribute (1.3 ms a call for ResNet-18's 217), a",
        '    plain one tens of nanoseconds. (A submodule swapped for another after the first call is not seen, as no',
        '    structural change of the module is: the kernels are written for the module as built.)"""',
        '    owners = model.__dict__.get("_kw_owners")',
        "    if owners is None:",
        "        owners = []",
        "        for path in _KW_PATHS:",
        '            module, _, name = path.rpartition(".")',
        "            owners.append((model.get_submodule(module), name))",
        '        model.__dict__["_kw_owners"] = owners',
        "    return tuple(getattr(owner, name) for owner, name in owners)",
    ]
    return "\n".join(lines)
