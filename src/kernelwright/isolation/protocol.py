"""The child protocol: one typed record for each isolated job's spec and for each kind of report a child sends.

A parent builds a spec record (:class:`ReferenceSpec`, :class:`CandidateSpec`, …) and :func:`run_child
<kernelwright.isolation.process.run_child>` writes it as JSON; the child reads it back into the same record
(:data:`SPECS`). The child reports with ``channel.send(record)``: one JSON line ``{"event": KIND, **fields}``
(:func:`wire`). The parent reads each line back into the record its job may send (:data:`REPORTS`, :func:`read`)
and its code reads attributes, never keys.

Whatever runs in a child can write to its channel too (the candidate's code above all): a line that does not parse
into its record — a field missing or of the wrong type, a field the record does not have, a kind the job never
sends — is a :class:`ProtocolError`, which ``run_child`` counts among the run's ``protocol_errors`` (the verifier's
``protocol-violation``) and leaves out of its messages. A well-formed forgery still parses: the verifier trusts
only what it checks itself (the trials' outputs on disk, every expected trial reported).

Values whose shape belongs to another module stay plain JSON here and are read by their owners: a trial plan
(``verify.trials.TrialSpec``), the reference's work count (``verify.roofline.WorkCount``), device facts, ceilings,
a CUDA build's result, the export probe's plan.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from kernelwright.records import DEFAULT_POLICY, Policy

R = TypeVar("R", bound="Record")


class ProtocolError(ValueError):
    """A message or spec that does not parse into its record."""


# -- records: to JSON and back -----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Record:
    """A frozen record of JSON values: numbers, strings, booleans, None, tuples (JSON lists), dicts with string
    keys, and other records. ``from_json`` checks every field against its annotation."""

    DERIVED: ClassVar[tuple[str, ...]] = ()  # properties written to JSON as well (ignored when read back)

    def to_json(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_json(cls: type[R], data: Any) -> R:
        """The record ``data`` holds (a record of this class is returned as it is); :class:`ProtocolError` if it
        holds none."""
        return _decode(data, cls, "")


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        data = {f.name: _encode(getattr(value, f.name)) for f in fields(value)}
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


def _no_reserved_keys(details: Mapping[str, Any], what: str) -> None:
    """The parent passes these dicts on as a finding's details: keyword arguments of ``Judge.add(self, code,
    message, severity, **details)``."""
    clash = sorted({"self", "code", "message", "severity"} & set(details))
    if clash:
        raise ProtocolError(f"{what}: {clash[0]!r} is a reserved name")


# -- payload records ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Measurement(Record):
    """One timed call's statistics (verify/timing.py measures it): the candidate's, a baseline's, a tuned one's."""

    DERIVED: ClassVar[tuple[str, ...]] = ("iqr_ms",)

    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    mean_ms: float
    reps: int
    host_ms_per_call: float  # wall time of the timed batch / reps (flushes included)
    flush_ms: float  # median time of one L2 flush
    unexplained_ms_per_call: float  # wall time the events and flushes do not account for

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


@dataclass(frozen=True, kw_only=True)
class KernelRecord(Record):
    """One kernel the candidate's call ran (verify/launches.py lists them)."""

    name: str
    origin: str  # "own" or "library"
    source: str  # "triton", "extension", "aten", "cuda" (a device kernel from the profiler)
    launches: int
    device_time_us: float | None  # None where not measured (CPU)
    streams: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TimingSettings(Record):
    """How a job times its calls (verify/timing.py's ``measure``), from kernelwright's configuration."""

    min_reps: int
    max_reps: int
    target_ms: float
    warmup_ms: float

    @classmethod
    def from_config(cls, **overrides: Any) -> TimingSettings:
        from kernelwright.config import config

        return cls(**{"min_reps": config.timing_min_reps, "max_reps": config.timing_max_reps,
                      "target_ms": config.timing_target_ms, "warmup_ms": config.timing_warmup_ms, **overrides})


# -- job specs ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class JobSpec(Record):
    """What a parent asks of one child job (written to SPEC.json, read back by the job)."""


@dataclass(frozen=True, kw_only=True)
class ReferenceSpec(JobSpec):
    problem: str
    device: str
    init_seed: int
    trials: tuple[dict[str, Any], ...]  # TrialSpec.to_json() of every planned trial
    shared_dir: str  # what the candidate may read: inputs, init inputs, state
    private_dir: str  # the answers, for the parent alone
    policy: Policy = DEFAULT_POLICY
    size_globals: dict[str, int] = field(default_factory=dict)  # the problem's sizes, overrides applied
    size_overrides: dict[str, int] = field(default_factory=dict)
    count_work: bool = True  # FLOPs and bytes for the roofline
    aliasing: bool = True  # whether the problem's outputs alias or change its inputs


@dataclass(frozen=True, kw_only=True)
class CandidateSpec(JobSpec):
    candidate: str
    device: str
    init_seed: int
    trials: tuple[dict[str, Any], ...]  # the trials to run (TrialSpec.to_json())
    shared_dir: str
    out_dir: str  # the outputs of checked and timed calls, cubins
    policy: Policy = DEFAULT_POLICY
    expected_output_bytes: int = 0  # the reference's output size (free memory to leave when poisoning)
    profile_trial: int | None = None  # the call whose kernel list goes into the verdict
    watch_paths: tuple[str, ...] = ()  # opening these is reference-access
    inspect_archs: tuple[str, ...] = ()  # archs to cross-compile the Triton kernels for
    arch: str = "sm_90a"  # the arch CUDA extensions compile for without a GPU
    triton_kernels: tuple[str, ...] = ()  # Triton kernels the candidate's file defines
    timing: TimingSettings | None = None  # None: not timed
    n_sets: int = 4  # input sets rotated among timed calls


@dataclass(frozen=True, kw_only=True)
class BaselineSpec(JobSpec):
    problem: str
    device: str
    init_seed: int
    shared_dir: str
    input_sets: tuple[int, ...]  # the trials whose inputs are timed
    timing: TimingSettings
    policy: Policy = DEFAULT_POLICY
    size_overrides: dict[str, int] = field(default_factory=dict)
    variants: tuple[str, ...] = ("eager", "compile", "compile_max_autotune")
    calibrate: bool = True  # measure the device's ceilings too


@dataclass(frozen=True, kw_only=True)
class TuneSpec(JobSpec):
    problem: str
    device: str
    seed: int
    candidates: tuple[tuple[int, str], ...]  # (index, path) of each template candidate to time
    timing: TimingSettings
    policy: Policy = DEFAULT_POLICY
    n_sets: int = 2


@dataclass(frozen=True, kw_only=True)
class ProbeSpec(JobSpec):
    problem: str
    device: str
    max_elements: int = 1 << 18  # the budget of reduced sizes on the CPU


@dataclass(frozen=True, kw_only=True)
class ExportProbeSpec(JobSpec):
    reference: str  # the problem file
    variants: tuple[dict[str, Any], ...] = ()  # id, path, language (and the run it came from)
    trace: bool = True  # trace each Triton variant as torch.compile would
    prefix: str = ""  # of the probe's module names


@dataclass(frozen=True, kw_only=True)
class SanitizeSpec(JobSpec):
    problem: str
    candidate: str
    device: str
    seed: int
    size_overrides: dict[str, int] = field(default_factory=dict)  # none: reduced to max_elements
    max_elements: int = 1 << 16


SPECS: dict[str, type[JobSpec]] = {
    "reference": ReferenceSpec, "candidate": CandidateSpec, "baseline": BaselineSpec, "tune": TuneSpec,
    "probe": ProbeSpec, "export_probe": ExportProbeSpec, "sanitize": SanitizeSpec,
}


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


@dataclass(frozen=True, kw_only=True)
class DeviceFacts(Report):
    event: ClassVar[str] = "device"
    facts: dict[str, Any]  # verify/runtime.device_facts


@dataclass(frozen=True, kw_only=True)
class ReferenceTrial(Report):
    """The reference's side of one trial: how its inputs were made and what the answers look like, or why it was
    skipped (the answers themselves are files)."""

    event: ClassVar[str] = "trial"
    index: int
    kind: str
    skipped: str | None = None
    source: int | None = None
    seed: int | None = None
    note: str = ""  # how the inputs were made (a scale, a second shape)
    inputs: tuple[Any, ...] = ()  # tensors described, other values repr'd
    outputs: tuple[dict[str, Any], ...] = ()  # verify/tensors.describe of each
    container: str | None = None  # tensor, tuple or list
    finite: bool | None = None
    fp64: bool | None = None  # a float64 answer exists
    n_tensor_inputs: int | None = None


@dataclass(frozen=True, kw_only=True)
class Work(Report):
    event: ClassVar[str] = "work"
    work: dict[str, Any]  # verify.roofline.WorkCount.to_json()


@dataclass(frozen=True, kw_only=True)
class Semantics(Report):
    """What the problem's own forward does to its inputs (a candidate may do the same)."""

    event: ClassVar[str] = "semantics"
    outputs_alias_inputs: tuple[int, ...] = ()
    mutates_inputs: bool = False


@dataclass(frozen=True, kw_only=True)
class ReferenceKernels(Report):
    event: ClassVar[str] = "reference_kernels"
    names: tuple[str, ...]  # device kernels (GPU) or aten operators (CPU) of one forward
    method: str


@dataclass(frozen=True, kw_only=True)
class Weights(Report):
    event: ClassVar[str] = "weights"
    source: str  # where the candidate's weights came from


@dataclass(frozen=True, kw_only=True)
class TrialStart(Report):
    event: ClassVar[str] = "trial_start"
    index: int
    kind: str


@dataclass(frozen=True, kw_only=True)
class CandidateTrial(Report):
    """The candidate's side of one trial: raw observations of one call (its outputs are a file)."""

    event: ClassVar[str] = "trial"
    index: int
    kind: str
    output_types: tuple[str, ...]  # module.qualname of each output
    outputs: tuple[dict[str, Any], ...]  # verify/tensors.describe of each tensor output
    container: str | None
    mutated_inputs: tuple[int, ...]
    aliased_outputs: tuple[int, ...]
    late_writes: tuple[int, ...]  # outputs that changed after forward returned
    triton_launches: dict[str, int]
    extension_calls: dict[str, int]
    own_calls: int  # launches of the candidate's own code seen from Python
    own_device_kernels: tuple[str, ...] | None  # GPU: the candidate's own device kernels (None: not profiled)
    device_kernels: int | None
    wall_s: float


@dataclass(frozen=True, kw_only=True)
class Kernels(Report):
    event: ClassVar[str] = "kernels"
    kernels: tuple[KernelRecord, ...]  # of the profiled call
    method: str


@dataclass(frozen=True, kw_only=True)
class ChildFinding(Report):
    """Evidence the candidate's job saw itself (the integrity monitor, the L2 checks)."""

    event: ClassVar[str] = "finding"
    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _no_reserved_keys(self.details, "details")


@dataclass(frozen=True, kw_only=True)
class Phase(Report):
    event: ClassVar[str] = "phase"
    name: str  # "timing", "instructions": where a failure from here on belongs


@dataclass(frozen=True, kw_only=True)
class TimingResult(Report):
    event: ClassVar[str] = "timing"
    measurement: Measurement
    side_stream: bool  # work the timed stream did not see
    timed_trials: tuple[int, ...]  # the trials whose inputs were timed (their outputs are files)
    calls_without_own_kernel: int
    timed_calls: int


@dataclass(frozen=True, kw_only=True)
class Cubin(Report):
    """A compiled kernel for the instruction summary: ran natively (``arch`` "native") or cross-compiled."""

    event: ClassVar[str] = "cubin"
    name: str | None  # None: a CUDA extension compiled without a GPU
    arch: str
    path: str
    ptx_path: str
    ptxas_log: str = ""
    n_regs: int | None = None
    n_spills: int | None = None  # Triton's count of 4-byte words
    shared: int | None = None  # dynamic shared memory, bytes
    num_warps: int | None = None


@dataclass(frozen=True, kw_only=True)
class Binary(Report):
    event: ClassVar[str] = "binary"
    name: str  # a CUDA extension the candidate built
    path: str  # its shared object


@dataclass(frozen=True, kw_only=True)
class CudaBuild(Report):
    """A CUDA extension compiled (or not) without a GPU."""

    event: ClassVar[str] = "cuda_build"
    name: str
    arch: str
    result: dict[str, Any]  # inspect.cuda_compile's result; "ok": True, False or None (not compiled)

    def __post_init__(self) -> None:
        _no_reserved_keys(self.result, "result")
        if self.result.get("ok") not in (True, False, None):
            raise ProtocolError("result.ok: must be true, false or null")


@dataclass(frozen=True, kw_only=True)
class BaselineResult(Report):
    event: ClassVar[str] = "baseline"
    name: str  # eager, compile, compile_max_autotune
    measurement: Measurement | None  # None: it failed
    error: str = ""
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Ceilings(Report):
    event: ClassVar[str] = "ceilings"
    ceilings: dict[str, Any]  # hardware.calibration's measured ceilings


@dataclass(frozen=True, kw_only=True)
class TuneStart(Report):
    event: ClassVar[str] = "tune_start"
    index: int


@dataclass(frozen=True, kw_only=True)
class Tuned(Report):
    event: ClassVar[str] = "tuned"
    index: int
    ok: bool
    measurement: Measurement | None = None
    error: str = ""  # "wrong output: ..." or "STATUS: Exception: ..."
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class ProbeResult(Report):
    """What running a problem once showed (verify/probe.py): also what ``probe_problem`` returns."""

    event: ClassVar[str] = "probe"
    ok: bool
    message: str  # one line: what ran, or what went wrong
    outputs: tuple[dict[str, Any], ...] = ()  # shape and dtype of each output
    reduced_sizes: dict[str, int] = field(default_factory=dict)  # CPU only
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ExportProbeResult(Report):
    event: ClassVar[str] = "export_probe"
    result: dict[str, Any]  # export/probe.py's plan, or {"ok": False, "message": ...}


@dataclass(frozen=True, kw_only=True)
class SanitizeRan(Report):
    """The candidate's forward finished under compute-sanitizer (what the tool saw is in its own output)."""

    event: ClassVar[str] = "sanitize"
    seconds: float
    sizes: dict[str, int] = field(default_factory=dict)


_ANY_JOB = (JobError, Done, LockWait, Note)
REPORTS: dict[str, dict[str, type[Report]]] = {
    job: {kind.event: kind for kind in (*_ANY_JOB, *kinds)} for job, kinds in {
        "reference": (DeviceFacts, ReferenceTrial, Work, Semantics, ReferenceKernels),
        "candidate": (DeviceFacts, Weights, TrialStart, CandidateTrial, Kernels, ChildFinding, Phase, TimingResult,
                      Cubin, Binary, CudaBuild),
        "baseline": (BaselineResult, Ceilings),
        "tune": (TuneStart, Tuned),
        "probe": (ProbeResult,),
        "export_probe": (ExportProbeResult,),
        "sanitize": (SanitizeRan,),
    }.items()
}


def wire(report: Report) -> dict[str, Any]:
    """The message as it goes on the channel."""
    return {"event": report.event, **_encode(report)}


def read(job: str, message: Mapping[str, Any]) -> Report:
    """The record of one message from ``job``'s child; :class:`ProtocolError` if it is not one that job sends."""
    event = message.get("event")
    kind = REPORTS.get(job, {}).get(event) if isinstance(event, str) else None
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
