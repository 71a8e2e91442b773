"""The child protocol: typed records for what a parent asks of an isolated job and what the job reports back.

Each job lives in :mod:`kernelwright.jobs`: its module defines the job's spec (a :class:`JobSpec` subclass, which
registers the job: its name, its reports, the function the child runs) and its report records. A parent builds
the spec and :func:`run_child <kernelwright.isolation.process.run_child>` writes it as JSON; the child reads it back
into the same record (:func:`spec_class`). The child reports with ``channel.send(record)``: one JSON line
``{"event": KIND, **fields}`` (:func:`wire`). The parent reads each line back into the record its job may send
(:func:`report_kinds`, :func:`read`) and its code reads attributes, never keys.

Whatever runs in a child can write to its channel too (the candidate's code above all): a line that does not parse
into its record — a field missing or of the wrong type, a field the record does not have, a kind the job never
sends — is a :class:`ProtocolError`, which ``run_child`` counts among the run's ``protocol_errors`` (the verifier's
``protocol-violation``) and leaves out of its messages. A well-formed forgery still parses: the verifier trusts
only what it checks itself (the trials' outputs on disk, every expected trial reported).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeVar

from kernelwright.records import Policy

R = TypeVar("R", bound="Record")


class ProtocolError(ValueError):
    """A message or spec that does not parse into its record."""


# -- records: to JSON and back -----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Record:
    """A frozen record of JSON values: numbers, strings, booleans, None, tuples (JSON lists), dicts with string
    keys, and other records. ``from_json`` checks every field against its annotation."""

    DERIVED: ClassVar[tuple[str, ...]] = ()  # properties written to JSON as well (ignored when read back)
    # fields left out of the JSON while they hold their default (a field added later: older files read and write
    # back unchanged)
    OMIT_DEFAULT: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_json(cls: type[R], data: Any) -> R:
        """The record ``data`` holds (a record of this class is returned as it is); :class:`ProtocolError` if it
        holds none."""
        return _decode(data, cls, "")


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        data = {f.name: _encode(getattr(value, f.name)) for f in fields(value)
                if f.name not in value.OMIT_DEFAULT or getattr(value, f.name) != f.default}
        data.update((name, getattr(value, name)) for name in value.DERIVED)
        return data
    if isinstance(value, Policy):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encode(v) for k, v in value.items()}
    return value


@functools.cache
def _field_types(cls: type[Record]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


_SCALARS: dict[Any, tuple[type, ...]] = {float: (int, float), int: (int,), str: (str,), bool: (bool,)}


def _decode(value: Any, tp: Any, where: str) -> Any:
    if tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, Record):
        return _decode_record(value, tp, where)
    if tp is Policy:
        if isinstance(value, Policy):
            return value
        if isinstance(value, Mapping) and set(value) <= {"allow_tf32", "allow_reduced_precision"} and all(
                isinstance(v, bool) for v in value.values()):
            return Policy.from_json(value)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) == 1:  # X | None: X's own complaint
            return _decode(value, options[0], where)
        for arg in options:
            try:
                return _decode(value, arg, where)
            except ProtocolError:
                continue
    elif origin is tuple and isinstance(value, (list, tuple)):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) == len(args):
            return tuple(_decode(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    elif origin is dict and isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _decode(v, args[1], _at(where, k)) for k, v in value.items()}
    elif tp in _SCALARS and isinstance(value, _SCALARS[tp]) and (tp is bool or not isinstance(value, bool)):
        return float(value) if tp is float else value
    shown = repr(value) if isinstance(value, (bool, int, float, type(None))) or (
        isinstance(value, str) and len(value) <= 30) else f"a {type(value).__name__}"
    raise ProtocolError(f"{where or 'the value'}: {shown} is not {_type_name(tp)}")


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in typing.get_args(tp))
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _decode_record(value: Any, cls: type[R], where: str) -> R:
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ProtocolError(f"{where or 'the value'}: a {type(value).__name__} is not a {cls.__name__} object")
    types_ = _field_types(cls)
    unknown = [k for k in value if k not in types_ and k not in cls.DERIVED]
    if unknown:
        raise ProtocolError(f"{_at(where, str(unknown[0]))}: not a field of {cls.__name__}")
    kwargs = {}
    for f in fields(cls):
        if f.name in value:
            kwargs[f.name] = _decode(value[f.name], types_[f.name], _at(where, f.name))
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ProtocolError(f"{_at(where, f.name)}: missing")
    return cls(**kwargs)


def no_reserved_keys(details: Mapping[str, Any], what: str) -> None:
    """The parent passes these dicts on as a finding's details: keyword arguments of ``Judge.add(self, code,
    message, severity, **details)``."""
    clash = sorted({"self", "code", "message", "severity"} & set(details))
    if clash:
        raise ProtocolError(f"{what}: {clash[0]!r} is a reserved name")


# -- reports -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Report(Record):
    """One message from a child; ``event`` is its kind on the wire."""

    event: ClassVar[str] = ""


@dataclass(frozen=True, kw_only=True)
class Note(Report):
    """A diagnostic of any job (a profiler, a check or a compiler that was unavailable): a note in the verdict."""

    event: ClassVar[str] = "note"
    code: str
    message: str


@dataclass(frozen=True, kw_only=True)
class JobError(Report):
    """The job failed (child.main turns every exception into one): the verdict status it stands for."""

    event: ClassVar[str] = "error"
    status: str
    code: str
    message: str
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Done(Report):
    """The job reached its end (child.main's last word; a candidate can forge it, so it proves nothing alone)."""

    event: ClassVar[str] = "done"


@dataclass(frozen=True, kw_only=True)
class LockWait(Report):
    """Seconds the job waited for other processes' measurements on a shared GPU."""

    event: ClassVar[str] = "lock_wait"
    seconds: float


ANY_JOB: tuple[type[Report], ...] = (JobError, Done, LockWait, Note)  # what every job may send


# -- job specs: each job's record, registered by its own module (kernelwright/jobs/) ------------------------------
_JOBS: dict[str, type[JobSpec]] = {}


@dataclass(frozen=True, kw_only=True)
class JobSpec(Record):
    """What a parent asks of one child job (written to SPEC.json, read back by the job). A job's spec names the
    job (``job``), the reports it sends besides :data:`ANY_JOB` (``reports``) and the function the child runs
    (``runs``: ``"module:function"``, imported in the child only); defining the class registers the job."""

    job: ClassVar[str] = ""
    reports: ClassVar[tuple[type[Report], ...]] = ()
    runs: ClassVar[str] = ""
    # The job runs code no one vouches for (a candidate): its box shows the kernelwright cache read-only, hides the
    # temporary folders (other verifies' files), and gives it caches of its own (isolation/process.py).
    untrusted: ClassVar[bool] = False
    # Modules a process started ahead of its job imports while it waits for the spec (child._warm_up), beyond the
    # job's own module: what the zygote may not have imported yet when it forked the job.
    warm: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.job:
            if not cls.runs or ":" not in cls.runs:
                raise TypeError(f"job {cls.job!r}: runs must name the child's function as 'module:function'")
            _JOBS[cls.job] = cls


def jobs() -> dict[str, type[JobSpec]]:
    """Every job registered in this process (importing :mod:`kernelwright.jobs` registers them all)."""
    return dict(_JOBS)


def spec_class(job: str) -> type[JobSpec]:
    """The spec record of ``job``; :class:`ProtocolError` if no module registered it."""
    found = _JOBS.get(job)
    if found is None:
        raise ProtocolError(f"no job named {job!r} is registered; known: {', '.join(sorted(_JOBS)) or 'none'} "
                            "(import kernelwright.jobs)")
    return found


def report_kinds(job: str) -> dict[str, type[Report]]:
    """The reports ``job``'s child may send, by their ``event`` (none for a job no module registered)."""
    spec = _JOBS.get(job)
    return {kind.event: kind for kind in (*ANY_JOB, *(spec.reports if spec is not None else ()))}


def wire(report: Report) -> dict[str, Any]:
    """The message as it goes on the channel."""
    return {"event": report.event, **_encode(report)}


def read(job: str, message: Mapping[str, Any]) -> Report:
    """The record of one message from ``job``'s child; :class:`ProtocolError` if it is not one that job sends."""
    event = message.get("event")
    kind = report_kinds(job).get(event) if isinstance(event, str) else None
    if kind is None:
        raise ProtocolError(f"the {job} job sends no {str(event)[:40]!r} message")
    try:
        return _decode_record({k: v for k, v in message.items() if k != "event"}, kind, "")
    except ProtocolError as exc:
        raise ProtocolError(f"malformed {event!r} message from the child: {str(exc)[:160]}") from None


def screen(job: str, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the messages that parse into ``job``'s records, why each other one does not)."""
    kept, errors = [], []
    for message in messages:
        try:
            read(job, message)
        except ProtocolError as exc:
            errors.append(str(exc))
            continue
        kept.append(message)
    return kept, errors
