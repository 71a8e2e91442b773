"""The sanitize job: one forward of the candidate under compute-sanitizer (the tool wraps the process).
Runs in :func:`kernelwright.verify.child.sanitize.run_sanitize_job`; the parent's side (the tool run, its log
read into findings) is verify/sanitize.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from kernelwright.isolation.protocol import JobSpec, Report


@dataclass(frozen=True, kw_only=True)
class SanitizeRan(Report):
    """The candidate's forward finished under compute-sanitizer (what the tool saw is in its own output)."""

    event: ClassVar[str] = "sanitize"
    seconds: float
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SanitizeSpec(JobSpec):
    job: ClassVar[str] = "sanitize"
    reports: ClassVar[tuple[type[Report], ...]] = (SanitizeRan,)
    runs: ClassVar[str] = "kernelwright.verify.child.sanitize:run_sanitize_job"
    untrusted: ClassVar[bool] = True

    problem: str
    candidate: str
    device: str
    seed: int
    size_overrides: dict[str, int] = field(default_factory=dict)  # none: reduced to max_elements
    max_elements: int = 1 << 16
