"""The export probe job: an exported op's signature and each variant's fit, found by running the code.
Runs in :func:`kernelwright.export.probe.run_export_probe_job`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kernelwright.isolation.protocol import JobSpec, Record, Report


@dataclass(frozen=True, kw_only=True)
class ProbeVariant(Record):
    """One variant the probe imports and traces: a run's ``best.py`` copied for the probe."""

    id: str
    path: str  # the copy the probe imports
    language: str  # "triton" or "cuda"
    run: str = ""  # the run's own file, for messages

    @property
    def shown(self) -> str:
        return self.run or self.path


@dataclass(frozen=True, kw_only=True)
class ExportProbeResult(Report):
    event: ClassVar[str] = "export_probe"
    result: dict[str, Any]  # export/probe.py's plan, or {"ok": False, "message": ...}


@dataclass(frozen=True, kw_only=True)
class ExportProbeSpec(JobSpec):
    job: ClassVar[str] = "export_probe"
    reports: ClassVar[tuple[type[Report], ...]] = (ExportProbeResult,)
    runs: ClassVar[str] = "kernelwright.export.probe:run_export_probe_job"

    reference: str  # the problem file
    variants: tuple[ProbeVariant, ...] = ()
    trace: bool = True  # trace each Triton variant as torch.compile would
    prefix: str = ""  # of the probe's module names
