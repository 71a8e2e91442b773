"""The reference job: the problem's own ``Model`` makes every trial's inputs and answers (the answers go to the
parent's private directory, never where the candidate can read), counts the work for the roofline and says what
the forward does to its inputs. Runs in :func:`kernelwright.verify.reference.run_reference_job`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from kernelwright.isolation.protocol import JobSpec, Report
from kernelwright.jobs.records import DeviceFacts, TensorInfo, TrialSpec, WorkCount
from kernelwright.records import DEFAULT_POLICY, Policy


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
    inputs: tuple[TensorInfo | str, ...] = ()  # tensors described, other values repr'd
    outputs: tuple[TensorInfo, ...] = ()
    container: str | None = None  # tensor, tuple or list
    finite: bool | None = None
    fp64: bool | None = None  # a float64 answer exists
    n_tensor_inputs: int | None = None


@dataclass(frozen=True, kw_only=True)
class Work(Report):
    event: ClassVar[str] = "work"
    work: WorkCount


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
class ScratchNeed(Report):
    """The scratch space a trial takes, sent where the remaining trials' files cannot all fit (before the
    ``scratch-space`` error): the parent then checks the trials in groups that do (verify/groups.py)."""

    event: ClassVar[str] = "scratch_need"
    trial_bytes: int  # one trial's reference files: its inputs and its native and float64 answers
    output_bytes: int  # one candidate call's output file
    room_bytes: int  # what the scratch space holds besides what is there, less the margin it keeps
    input_bytes: int = 0  # one trial's inputs: the candidate's job keeps a device copy of each trial's
    device_room: int = 0  # the device memory a candidate's job may fill with trial inputs (0: not bounded here)


@dataclass(frozen=True, kw_only=True)
class ReferenceSpec(JobSpec):
    job: ClassVar[str] = "reference"
    reports: ClassVar[tuple[type[Report], ...]] = (DeviceFacts, ReferenceTrial, Work, Semantics, ReferenceKernels,
                                                  ScratchNeed)
    runs: ClassVar[str] = "kernelwright.verify.reference:run_reference_job"

    problem: str
    device: str
    init_seed: int
    trials: tuple[TrialSpec, ...]  # every planned trial
    shared_dir: str  # what the candidate may read: inputs, init inputs, state
    private_dir: str  # the answers, for the parent alone
    policy: Policy = DEFAULT_POLICY
    size_globals: dict[str, int] = field(default_factory=dict)  # the problem's sizes, overrides applied
    size_overrides: dict[str, int] = field(default_factory=dict)
    count_work: bool = True  # FLOPs and bytes for the roofline
    aliasing: bool = True  # whether the problem's outputs alias or change its inputs
    alone: bool = False  # the GPU lock held exclusively for the whole job (a re-run after running out of memory)
    candidate_outputs: int = 0  # output files the candidate's job writes afterwards (counted in the scratch check)
    timed_sets: int = 0  # the input sets the candidate's job copies to the device again for its timed calls
    # The seed whose inputs' shapes the second shape is found from: trial 0's (default: the first trial's).
    shape_seed: int | None = None
    scratch_limit: int = 0  # the most bytes the verify's folder may hold (0: what its file system has)
    held_bytes: int = 0  # bytes of earlier groups' files the parent still holds, counted against scratch_limit
