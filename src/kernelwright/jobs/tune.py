"""The tune job: one long-lived worker that checks and times many template candidates in turn (the search's
inner loop). Runs in :func:`kernelwright.search.worker.run_tune_job`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernelwright.isolation.protocol import JobSpec, Report
from kernelwright.jobs.records import Measurement, TimingSettings
from kernelwright.records import DEFAULT_POLICY, Policy


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
class TuneSpec(JobSpec):
    job: ClassVar[str] = "tune"
    reports: ClassVar[tuple[type[Report], ...]] = (TuneStart, Tuned)
    runs: ClassVar[str] = "kernelwright.search.worker:run_tune_job"

    problem: str
    device: str
    seed: int
    candidates: tuple[tuple[int, str], ...]  # (index, path) of each template candidate to time
    timing: TimingSettings
    policy: Policy = DEFAULT_POLICY
    n_sets: int = 2
