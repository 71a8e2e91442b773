"""The probe job: run a problem once (at reduced sizes on the CPU) and say what its outputs are.
Runs in :func:`kernelwright.verify.probe.run_probe_job`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from kernelwright.isolation.protocol import JobSpec, Report
from kernelwright.jobs.records import TensorInfo


@dataclass(frozen=True, kw_only=True)
class ProbeResult(Report):
    """What running a problem once showed (verify/probe.py): also what ``probe_problem`` returns."""

    event: ClassVar[str] = "probe"
    ok: bool
    message: str  # one line: what ran, or what went wrong
    outputs: tuple[TensorInfo, ...] = ()
    reduced_sizes: dict[str, int] = field(default_factory=dict)  # CPU only
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ProbeSpec(JobSpec):
    job: ClassVar[str] = "probe"
    reports: ClassVar[tuple[type[Report], ...]] = (ProbeResult,)
    runs: ClassVar[str] = "kernelwright.verify.probe:run_probe_job"

    problem: str
    device: str
    max_elements: int = 1 << 18  # the budget of reduced sizes on the CPU
