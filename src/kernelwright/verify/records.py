"""The verifier's input and output records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.inspect.analysis import KernelSummary
from kernelwright.jobs import KernelRecord, Measurement
from kernelwright.records import DEFAULT_POLICY, Finding, Policy, ProblemTraits, Severity, Status
from kernelwright.verify.compare import REFERENCE
from kernelwright.verify.roofline import Roofline


@dataclass(frozen=True, kw_only=True)
class VerifyOptions:
    """How to verify. ``None`` fields take their value from :data:`kernelwright.config.config`."""

    device: str | None = None  # "auto", "cpu" or "cuda"
    seed: int | None = None  # base seed; random when None (recorded in the verdict for --seed replay)
    trials: int | None = None  # random trials (at least 5)
    tolerance: str = REFERENCE  # "reference" or "kernelbench"
    tolerance_factor: float | None = None
    timing: bool = True  # time on a GPU (never on the CPU)
    compile_baseline: bool = True  # also time torch.compile (default and max-autotune-no-cudagraphs)
    # Which compile modes to time when compile_baseline is on (None: both): "compile", "compile_max_autotune".
    compile_modes: tuple[str, ...] | None = None
    # Baseline measurements already made for this problem on this device and toolchain (``kernelwright bench``'s
    # cache): name -> measurement JSON. Those present are reused, not timed again; the verdict notes it.
    reuse_baselines: Mapping[str, Any] | None = None
    allow_library_only: bool = False
    policy: Policy = DEFAULT_POLICY  # TF32 or half precision in an fp32 problem only where it says so
    distribution_trials: bool = True  # scaled and heavy-tailed inputs
    shape_trial: bool = True  # a second shape where the problem's size globals allow
    inspect_archs: tuple[str, ...] | None = None  # archs to cross-compile Triton kernels for (None: config.arch)
    timeout_s: float | None = None
    # When the verify must end (a search's or bench's budget; a time.monotonic() instant is taken as one): every
    # child's time limit is cut to it, and a verify it cuts short is a timeout verdict that names the budget.
    deadline: Deadline = NO_DEADLINE
    size_overrides: Mapping[str, int] | None = None  # the problem's size constants, changed (a smaller CPU check)
    # Without a GPU and without size_overrides: shrink a problem too big for the Triton interpreter (its inputs over
    # cpu_max_elements) to sizes it can check in reasonable time, and say so. False checks at the sizes as written.
    reduce_on_cpu: bool = True
    # Keep this verify's reference (inputs and answers, in this process's memory) for later verifies of the same
    # problem, seed, trials, sizes and device, and take an earlier one's: a search's candidates (verify/refcache.py).
    reuse_reference: bool = False
    # A file each step of the protocol appends a JSON line to as it starts and ends ({"phase", "event", "at_s",
    # "s"}; event "start", "end", or "stopped" where a signal or an exception left the step): where a verify that a
    # caller's limit kills was (the verdict says it only when the verify ends).
    progress_file: str | None = None
    # compute-sanitizer tools to run over the candidate's forward at reduced sizes once its trials pass ("memcheck",
    # "racecheck", "initcheck", "synccheck"; verify/sanitize.py): each report an integrity error. () none; None: all
    # four for a CUDA C++ candidate on a GPU (hand-written memory indexing and barriers), none for Triton.
    sanitize: tuple[str, ...] | None = None
    # On a GPU, one call of a passed candidate profiled under Nsight Compute for executed instruction counts
    # (verify/executed.py). None: the configuration's ``executed`` (on by default).
    executed: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "deadline", Deadline.of(self.deadline))


@dataclass(frozen=True, kw_only=True)
class TrialOutcome:
    index: int
    kind: str
    seed: int | None
    status: str  # "ok", "wrong", "skipped", "not-run"
    note: str = ""
    comparisons: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialOutcome:
        return cls(index=int(data["index"]), kind=data["kind"], seed=data.get("seed"), status=data["status"],
                   note=data.get("note", ""), comparisons=tuple(data.get("comparisons", ())))

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "seed": self.seed,
            "status": self.status,
            "note": self.note,
            "comparisons": [dict(c) for c in self.comparisons],
        }


# The executed section of a GPU pass (verify/executed.py: how it is made and judged).
# The classes a verdict reports, each from SASS instruction classes (kernelwright.inspect.sass.CLASSES).
EXECUTED_CLASSES: dict[str, tuple[str, ...]] = {
    "tensor_mma": ("mma", "wgmma", "tcgen05"),
    "tma": ("tma",),
    "cp_async": ("cp_async",),
    "mbarrier": ("mbarrier",),
    "global_load": ("global_load",),
    "global_store": ("global_store",),
    "local": ("local",),
}

@dataclass(frozen=True, kw_only=True)
class ExecutedKernelRow:
    """One kernel of the profiled call: own (the candidate's) or library; its classes present (SASS) and executed."""

    name: str
    own: bool
    launches: int
    duration_ns: float | None
    share: float | None  # of the profiled call's device time
    executed: Mapping[str, float] = field(default_factory=dict)  # class -> warp-level instructions executed
    predicated_true: Mapping[str, float] = field(default_factory=dict)  # class -> thread instructions, pred true
    present: Mapping[str, int] = field(default_factory=dict)  # class -> SASS instructions (own kernels)
    mma_types: Mapping[str, float] = field(default_factory=dict)  # operand type -> MMA instructions executed

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "own": self.own, "launches": self.launches, "duration_ns": self.duration_ns,
                "share": self.share, "executed": dict(self.executed), "predicated_true": dict(self.predicated_true),
                "present": dict(self.present), "mma_types": dict(self.mma_types)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExecutedKernelRow:
        return cls(name=data["name"], own=bool(data["own"]), launches=int(data.get("launches", 1)),
                   duration_ns=data.get("duration_ns"), share=data.get("share"),
                   executed=dict(data.get("executed") or {}), predicated_true=dict(data.get("predicated_true") or {}),
                   present=dict(data.get("present") or {}), mma_types=dict(data.get("mma_types") or {}))


@dataclass(frozen=True, kw_only=True)
class ExecutedEvidence:
    """The verdict's executed section: the profiled call's kernels, or why there are none (``note``)."""

    ran: bool
    note: str = ""
    seconds: float = 0.0
    kernels: tuple[ExecutedKernelRow, ...] = ()

    @property
    def own_share(self) -> float | None:
        """The candidate's own kernels' share of the profiled call's device time."""
        shares = [k.share for k in self.kernels if k.own and k.share is not None]
        return sum(shares) if shares else (0.0 if self.kernels else None)

    def classes(self) -> dict[str, dict[str, float]]:
        """Per class over the own kernels: {"present": SASS instructions, "executed": instructions executed}."""
        out: dict[str, dict[str, float]] = {}
        for name in EXECUTED_CLASSES:
            present = sum(k.present.get(name, 0) for k in self.kernels if k.own)
            executed = sum(k.executed.get(name, 0.0) for k in self.kernels if k.own)
            if present or executed:
                out[name] = {"present": present, "executed": executed}
        return out

    def to_json(self) -> dict[str, Any]:
        return {"ran": self.ran, "note": self.note, "seconds": self.seconds, "own_share": self.own_share,
                "classes": self.classes(), "kernels": [k.to_json() for k in self.kernels]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExecutedEvidence:
        return cls(ran=bool(data.get("ran")), note=data.get("note", ""), seconds=float(data.get("seconds", 0.0)),
                   kernels=tuple(ExecutedKernelRow.from_json(k) for k in data.get("kernels", ())))


@dataclass(frozen=True, kw_only=True)
class Verdict:
    status: Status
    message: str  # one line: what happened, or what was wrong
    clean: bool  # passed with no warning that undermines the pass (e.g. a degenerate problem)
    problem: str
    candidate: str
    problem_sha256: str
    candidate_sha256: str
    seed: int
    device: Mapping[str, Any]
    tolerance: Mapping[str, Any]
    trials: tuple[TrialOutcome, ...] = ()
    findings: tuple[Finding, ...] = ()
    # "candidate", "eager", "compile", "compile_max_autotune" -> the measurement (None: that baseline failed)
    timing: Mapping[str, Measurement | None] = field(default_factory=dict)
    speedups: Mapping[str, float] = field(default_factory=dict)  # "vs_eager", "vs_compile", ...
    roofline: Roofline | None = None
    percent_of_floor: float | None = None
    traits: ProblemTraits | None = None
    kernels: tuple[KernelRecord, ...] = ()  # what the profiled call ran, own and library
    instructions: tuple[KernelSummary, ...] = ()  # the candidate's kernels' SASS, per arch
    executed: ExecutedEvidence | None = None  # what one profiled call ran (a GPU pass; verify/executed.py)
    stderr_tail: str = ""
    duration_s: float = 0.0
    kernelwright_version: str = ""
    size_overrides: Mapping[str, int] = field(default_factory=dict)  # sizes the problem was checked at, if changed
    phases: Mapping[str, float] = field(default_factory=dict)  # wall seconds per step of the protocol

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def median_ms(self, name: str = "candidate") -> float | None:
        """The median of one timed thing ("candidate", "eager", "compile", "compile_max_autotune"); None where it
        was not timed or failed."""
        m = self.timing.get(name)
        return m.median_ms if m is not None else None

    def findings_of(self, severity: Severity) -> list[Finding]:
        return [f for f in self.findings if f.severity is severity]

    def has_finding(self, code: str) -> bool:
        return any(f.code == code for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "clean": self.clean,
            "message": self.message,
            "problem": self.problem,
            "candidate": self.candidate,
            "problem_sha256": self.problem_sha256,
            "candidate_sha256": self.candidate_sha256,
            "seed": self.seed,
            "device": dict(self.device),
            "tolerance": dict(self.tolerance),
            "findings": [f.to_json() for f in self.findings],
            "trials": [t.to_json() for t in self.trials],
            "timing": {k: (v.to_json() if v else None) for k, v in self.timing.items()},
            "speedups": dict(self.speedups),
            "roofline": self.roofline.to_json() if self.roofline else None,
            "percent_of_floor": self.percent_of_floor,
            "traits": self.traits.to_json() if self.traits else None,
            "kernels": [k.to_json() for k in self.kernels],
            "instructions": [i.to_json() for i in self.instructions],
            "stderr_tail": self.stderr_tail,
            "duration_s": self.duration_s,
            "kernelwright_version": self.kernelwright_version,
            "size_overrides": dict(self.size_overrides),
            "phases": dict(self.phases),
            # only where a GPU pass was profiled: an older verdict, or one without, writes back unchanged
            **({"executed": self.executed.to_json()} if self.executed else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """The inverse of :meth:`to_json` (for verdicts read back from files and databases)."""
        traits = data.get("traits")
        return cls(
            status=Status(data["status"]),
            message=data["message"],
            clean=bool(data["clean"]),
            problem=data["problem"],
            candidate=data["candidate"],
            problem_sha256=data["problem_sha256"],
            candidate_sha256=data["candidate_sha256"],
            seed=int(data["seed"]),
            device=dict(data.get("device") or {}),
            tolerance=dict(data.get("tolerance") or {}),
            trials=tuple(TrialOutcome.from_json(t) for t in data.get("trials", ())),
            findings=tuple(Finding.from_json(f) for f in data.get("findings", ())),
            timing={k: Measurement.from_json(v) if v else None for k, v in (data.get("timing") or {}).items()},
            speedups=dict(data.get("speedups") or {}),
            roofline=Roofline.from_json(data["roofline"]) if data.get("roofline") else None,
            percent_of_floor=data.get("percent_of_floor"),
            traits=ProblemTraits.from_json(traits) if traits else None,
            kernels=tuple(KernelRecord.from_json(k) for k in data.get("kernels", ())),
            instructions=tuple(KernelSummary.from_json(i) for i in data.get("instructions", ())),
            executed=_executed_from_json(data.get("executed")),
            stderr_tail=data.get("stderr_tail", ""),
            duration_s=float(data.get("duration_s", 0.0)),
            kernelwright_version=data.get("kernelwright_version", ""),
            size_overrides=dict(data.get("size_overrides") or {}),
            phases=dict(data.get("phases") or {}),
        )


def finite_json(value: Any) -> Any:
    """JSON has no NaN or infinity: such floats become null."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, Mapping):
        return {str(k): finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def verdict_json(verdict: Verdict) -> str:
    return json.dumps(finite_json(verdict.to_json()), indent=2, default=str, allow_nan=False)


def _executed_from_json(data: Mapping[str, Any] | None) -> ExecutedEvidence | None:
    return ExecutedEvidence.from_json(data) if data else None
