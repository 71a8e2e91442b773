"""The baseline job: eager PyTorch and ``torch.compile`` timed on the problem's inputs, and the device's measured
ceilings. Runs in :func:`kernelwright.verify.baseline.run_baseline_job`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kernelwright.isolation.protocol import JobSpec, Report
from kernelwright.jobs.records import Measurement, TimingSettings
from kernelwright.records import DEFAULT_POLICY, Policy


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
class BaselineSpec(JobSpec):
    job: ClassVar[str] = "baseline"
    reports: ClassVar[tuple[type[Report], ...]] = (BaselineResult, Ceilings)
    runs: ClassVar[str] = "kernelwright.verify.baseline:run_baseline_job"
    warm: ClassVar[tuple[str, ...]] = ("torch._inductor.compile_fx",)  # torch.compile's baselines: some 4 s

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
