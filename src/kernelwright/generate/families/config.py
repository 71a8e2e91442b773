"""A template family's configuration as a typed record (issue 46).

Each family declares its configuration as a frozen, keyword-only dataclass over :class:`FamilyConfig`: its
fields typed (``int`` for tiles and warps, ``Literal[...]`` for a choice such as a variant), validated where the
record is made, so a bad configuration is refused when it is written, not when its kernel is rendered. The search,
the cost model and the writers read its fields. It is also a read-only mapping of the fields that are set (not
None), in field order, so what lists or stores configurations (``candidates.csv``, ``plan.txt``, a sweep's grid
laid over one) sees what it saw when configurations were dicts; :meth:`FamilyConfig.of` turns such a dict back
into the record, refusing a key the family does not know.

    @family_config
    class PoolConfig(FamilyConfig):
        BLOCK: int
        num_warps: int
        variant: Literal["lanes", "rows"] | None = None   # None: the default (lanes)
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Literal, TypeVar

from kernelwright.errors import ConfigError

C = TypeVar("C", bound="FamilyConfig")
T = TypeVar("T", bound=type)


def family_config(cls: T) -> T:
    """A family's configuration class: a frozen, keyword-only dataclass that compares and hashes as the mapping of
    its set fields (a record equals the dict it replaces: a space's duplicates are found whichever form they came
    in)."""
    return dataclasses.dataclass(frozen=True, kw_only=True, eq=False)(cls)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FamilyConfig(Mapping[str, Any]):
    """The base of every family's configuration record (see the module's docstring)."""

    def __post_init__(self) -> None:
        for name, (kind, choices, optional) in _checks(type(self)).items():
            value = getattr(self, name)
            if value is None:
                if not optional:
                    raise ConfigError(f"{type(self).__name__}: {name} is required")
                continue
            if choices is not None and value not in choices:
                raise ConfigError(f"{type(self).__name__}: {name}={value!r} is not one of "
                                  f"{', '.join(map(repr, choices))}")
            if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"{type(self).__name__}: {name}={value!r} is not a whole number >= 0")
            if kind is bool and not isinstance(value, bool):
                raise ConfigError(f"{type(self).__name__}: {name}={value!r} is not true or false")

    @classmethod
    def of(cls: type[C], config: Mapping[str, Any]) -> C:
        """``config`` as this family's record (itself where it is one): a dict from a sweep's grid, a test or a
        stored run. A key the family does not know is a :class:`ConfigError` naming it and the known ones."""
        if isinstance(config, cls):
            return config
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ConfigError(f"{cls.__name__} has no setting {unknown[0]!r} (its settings: {', '.join(known)})")
        return cls(**dict(config))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:
        return hash(tuple(self.items()))

    def replace(self: C, **changes: Any) -> C:
        """A copy with ``changes`` (validated like any new record)."""
        return dataclasses.replace(self, **changes)

    # -- the mapping of the set fields ------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, None) if key in _names(type(self)) else None
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return (name for name in _names(type(self)) if getattr(self, name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _checks(cls: type) -> dict[str, tuple[type | None, tuple[Any, ...] | None, bool]]:
    """Each field's base type (int, bool, str or None), its allowed values (a Literal's) and whether None is."""
    hints = typing.get_type_hints(cls)
    found: dict[str, tuple[type | None, tuple[Any, ...] | None, bool]] = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        optional = type(None) in args
        kinds = [a for a in args if a is not type(None)]
        choices: tuple[Any, ...] | None = None
        kind: type | None = None
        if len(kinds) == 1 and typing.get_origin(kinds[0]) is Literal:
            choices = typing.get_args(kinds[0])
        elif len(kinds) == 1 and kinds[0] in (int, bool, str):
            kind = kinds[0]
        found[field.name] = (kind, choices, optional)
    return found
