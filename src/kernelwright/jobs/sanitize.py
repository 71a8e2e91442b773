"""The sanitize and profile jobs: one forward of the candidate under a tool that wraps the process —
compute-sanitizer (:func:`kernelwright.verify.child.sanitize.run_sanitize_job`; the parent's side is
verify/sanitize.py) or Nsight Compute (:func:`kernelwright.verify.child.sanitize.run_profile_job`; the parent's side
is verify/executed.py)."""

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
class ForwardFields(JobSpec):
    """What both jobs need to build the candidate's model beside the reference's and call it (no job of its own)."""

    problem: str
    candidate: str
    device: str
    seed: int
    size_overrides: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SanitizeSpec(ForwardFields):
    job: ClassVar[str] = "sanitize"
    reports: ClassVar[tuple[type[Report], ...]] = (SanitizeRan,)
    runs: ClassVar[str] = "kernelwright.verify.child.sanitize:run_sanitize_job"
    untrusted: ClassVar[bool] = True

    max_elements: int = 1 << 16  # size_overrides empty: the sizes reduced to this many elements


# The NVTX range around the profiled forward (ncu profiles only the kernels launched inside it): not the warm-up
# call before it, where Triton compiles and autotunes, nor the inputs' and weights' set-up.
PROFILE_RANGE = "kernelwright-forward"


@dataclass(frozen=True, kw_only=True)
class ProfileSpec(ForwardFields):
    """One warm-up forward, then one forward inside :data:`PROFILE_RANGE`, at the verify's sizes."""

    job: ClassVar[str] = "profile"
    reports: ClassVar[tuple[type[Report], ...]] = (SanitizeRan,)
    runs: ClassVar[str] = "kernelwright.verify.child.sanitize:run_profile_job"
    untrusted: ClassVar[bool] = True
