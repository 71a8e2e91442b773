"""The template families, each registered where it is defined (issue 46).

A family is one folder under ``generate/families/`` (its package's name is the family's name) whose class is
decorated with :func:`register`; its ``priority`` says where it stands in the claim order (lower claims first: the
families whose anchors bound a problem go before pointwise, which takes what is left). :func:`family_classes`
imports every family folder and returns the registered classes in claim order; a folder that fails to import, or
that registers no family of its own name, is an error that names it (a family that silently vanished would change
every plan it used to claim). :func:`family_names` lists the folders without importing them (the cost model's
feature names: no torch at import).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any, TypeVar

from kernelwright.errors import KernelwrightError

_FAMILIES_DIR = Path(__file__).parent
_PACKAGE = __name__.rpartition(".")[0]
_REGISTERED: dict[str, type] = {}

T = TypeVar("T", bound=type)


class FamilyError(KernelwrightError):
    """A template family folder that cannot be used: it fails to import, or registers no family of its name."""


def register(cls: T) -> T:
    """Class decorator: ``cls`` (with ``name`` and ``priority``) is a template family."""
    name, priority = getattr(cls, "name", None), getattr(cls, "priority", None)
    if not isinstance(name, str) or not isinstance(priority, int):
        raise TypeError(f"template family {cls.__qualname__} needs a str `name` and an int `priority`")
    other = _REGISTERED.get(name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise TypeError(f"template family name {name!r} is taken by {other.__qualname__}")
    _REGISTERED[name] = cls
    return cls


def family_names() -> tuple[str, ...]:
    """The families' names, one a folder, sorted (read from the folders: nothing is imported)."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules([str(_FAMILIES_DIR)]) if m.ispkg))


def family_classes() -> list[type]:
    """Every family's class, in claim order (``priority``, then name). Raises :class:`FamilyError` naming a family
    folder that fails to import or registers no family of its own name."""
    for name in family_names():
        try:
            importlib.import_module(f"{_PACKAGE}.{name}")
        except Exception as exc:  # noqa: BLE001 - any failure of a family's import is that family's
            raise FamilyError(f"template family {name!r} failed to import ({type(exc).__name__}: {exc}); fix "
                              f"generate/families/{name}/ or remove the folder") from exc
        if name not in _REGISTERED:
            raise FamilyError(f"template family folder generate/families/{name}/ registers no family named "
                              f"{name!r}; decorate its class with @register and set name = {name!r}")
    return sorted(_REGISTERED.values(), key=lambda cls: (cls.priority, cls.name))


def families() -> list[Any]:
    """An instance of every family, in claim order."""
    return [cls() for cls in family_classes()]
