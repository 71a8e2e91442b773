"""The names a problem's ``forward`` gives its inputs, made into identifiers generated code can use.

An exported op's signature (export/probe.py) and the backward problem of ``optimize --backward``
(generate/backward.py) name the same inputs the same way, so a variant's gradients line up with the op's arguments.
"""

from __future__ import annotations

import inspect
import keyword
import re

# Names the exported package's generated __init__.py uses where an argument could shadow them (a forward parameter
# called `torch` would break the package): arguments so named are renamed (`torch_1`).
GENERATED_NAMES = frozenset({"torch", "functools", "Path", "Optional", "OpRuntime", "_reference", "_runtime", "_",
                             "needs", "self", "ctx", "args", "kwargs", *(f"grad_{i}" for i in range(64))})


def forward_input_names(model_cls: type, count: int) -> list[str]:
    """The forward's parameter names (``input_<i>`` where the signature does not name them), as identifiers."""
    try:
        params = list(inspect.signature(model_cls.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    names = [positional[i] if i < len(positional) else f"input_{i}" for i in range(count)]
    return unique_identifiers(names, GENERATED_NAMES)


def unique_identifiers(names: list[str], taken: set[str] | frozenset[str] | None = None) -> list[str]:
    """``names`` made into distinct Python identifiers that are not keywords and not in ``taken``."""
    used = set(taken or ())
    out = []
    for name in names:
        ident = re.sub(r"\W", "_", name) or "arg"
        if ident[0].isdigit():
            ident = "_" + ident
        if keyword.iskeyword(ident):
            ident += "_"
        candidate, n = ident, 1
        while candidate in used:
            n += 1
            candidate = f"{ident}_{n}"
        used.add(candidate)
        out.append(candidate)
    return out
