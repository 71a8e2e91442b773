"""The export probe job: an exported op's signature and each variant's fit, found by running the code.
Runs in :func:`kernelwright.export.probe.run_export_probe_job`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kernelwright.isolation.protocol import JobSpec, Report


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
    variants: tuple[dict[str, Any], ...] = ()  # id, path, language (and the run it came from)
    trace: bool = True  # trace each Triton variant as torch.compile would
    prefix: str = ""  # of the probe's module names
