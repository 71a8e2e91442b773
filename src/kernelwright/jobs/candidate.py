"""The candidate job: the candidate's ``ModelNew`` runs every trial under the integrity monitor, is timed, and its
kernels are compiled for the instruction summary. Runs in
:func:`kernelwright.verify.child.candidate.run_candidate_job` (verify/child/: what runs beside untrusted code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kernelwright.isolation.protocol import JobSpec, Record, Report, no_reserved_keys
from kernelwright.jobs.records import (
    DeviceFacts,
    KernelRecord,
    Measurement,
    TensorInfo,
    TimingSettings,
    TrialSpec,
)
from kernelwright.records import DEFAULT_POLICY, Policy


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
    outputs: tuple[TensorInfo, ...]  # each tensor output
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
    checks: tuple[str, ...] = ()  # the integrity checks made for this call ("identities", "background")


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
        no_reserved_keys(self.details, "details")


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
    checks: tuple[str, ...] = ()  # the integrity checks made after the timed calls


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
class BuildResult(Record):
    """What compiling a CUDA extension's source for an arch gave (inspect.cuda_compile's result, without its
    binaries: the cubin and PTX are files the job reports as a :class:`Cubin`)."""

    ok: bool | None  # None: not compiled (no toolchain here)
    arch: str = ""
    cubin_bytes: int = 0
    ptx_bytes: int = 0
    log: str = ""  # the relevant lines: errors, warnings, ptxas infos
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # ptxas -v figures per kernel
    command: tuple[str, ...] = ()
    seconds: float = 0.0
    cached: bool = False

    def first_error(self) -> str:
        return next((line.strip() for line in self.log.splitlines() if "error" in line.lower()), "")


@dataclass(frozen=True, kw_only=True)
class CudaBuild(Report):
    """A CUDA extension compiled (or not) without a GPU."""

    event: ClassVar[str] = "cuda_build"
    name: str
    arch: str
    result: BuildResult


@dataclass(frozen=True, kw_only=True)
class CandidateSpec(JobSpec):
    job: ClassVar[str] = "candidate"
    reports: ClassVar[tuple[type[Report], ...]] = (DeviceFacts, Weights, TrialStart, CandidateTrial, Kernels, ChildFinding,
                                                   Phase, TimingResult, Cubin, Binary, CudaBuild)
    runs: ClassVar[str] = "kernelwright.verify.child.candidate:run_candidate_job"
    untrusted: ClassVar[bool] = True

    candidate: str
    device: str
    init_seed: int
    trials: tuple[TrialSpec, ...]  # the trials to run
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
    # Run with the device to this job alone (the GPU lock held exclusively for the whole job): the re-run of a job
    # that ran out of memory beside other jobs of a parallel bench, so that a neighbour's memory is never charged
    # to the candidate.
    alone: bool = False
