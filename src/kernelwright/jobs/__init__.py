"""The isolated jobs: one module each, holding the job's spec and the reports it sends.

- :mod:`.reference` — the problem's own model makes the trials' inputs and answers
- :mod:`.candidate` — the candidate runs the trials under the integrity monitor, is timed and compiled
- :mod:`.baseline` — eager PyTorch and ``torch.compile`` timed, the device's ceilings measured
- :mod:`.tune` — the search's worker times many template candidates in turn
- :mod:`.probe` — a problem run once, to learn its outputs and reduced sizes
- :mod:`.export_probe` — an exported op's signature and each variant's fit
- :mod:`.sanitize` — one forward under compute-sanitizer
- :mod:`.records` — what several jobs speak (a measurement, a kernel record, timing settings, a trial)

A job's spec class names the job, its reports and the function the child runs (``runs``, a ``module:function``
string: that code sits above these records — in verify/, search/ and export/, beside the modules it shares with
the parent — and is imported only in the child). Defining the spec registers the job with the protocol
(:func:`kernelwright.isolation.protocol.spec_class`); importing this package registers them all, which the child's
entry point (``python -m kernelwright.jobs``) and every parent that builds a spec do. isolation/ keeps the record
machinery, the channel and :func:`~kernelwright.isolation.process.run_child`. The records import no torch.
"""

from __future__ import annotations

from kernelwright.jobs import baseline, candidate, export_probe, probe, reference, sanitize, tune
from kernelwright.jobs.baseline import BaselineResult, BaselineSpec, Ceilings
from kernelwright.jobs.candidate import (
    Binary,
    BuildResult,
    CandidateSpec,
    CandidateTrial,
    ChildFinding,
    Cubin,
    CudaBuild,
    Kernels,
    Phase,
    TimingResult,
    TrialStart,
    Weights,
)
from kernelwright.jobs.export_probe import ExportProbeResult, ExportProbeSpec, ProbeVariant
from kernelwright.jobs.probe import ProbeResult, ProbeSpec
from kernelwright.jobs.records import (
    DeviceFacts,
    KernelRecord,
    Measurement,
    TensorInfo,
    TimingSettings,
    TrialSpec,
    WorkCount,
)
from kernelwright.jobs.reference import (
    ReferenceKernels,
    ReferenceSpec,
    ReferenceTrial,
    ScratchNeed,
    Semantics,
    Work,
)
from kernelwright.jobs.sanitize import PROFILE_RANGE, ProfileSpec, SanitizeRan, SanitizeSpec
from kernelwright.jobs.tune import Tuned, TuneSpec, TuneStart

MODULES = (reference, candidate, baseline, tune, probe, export_probe, sanitize)

__all__ = [
    "MODULES", "BaselineResult", "BaselineSpec", "Binary", "BuildResult", "CandidateSpec", "CandidateTrial", "Ceilings",
    "ChildFinding", "Cubin", "CudaBuild", "DeviceFacts", "ExportProbeResult", "ExportProbeSpec", "KernelRecord",
    "Kernels", "Measurement", "Phase", "ProbeResult", "ProbeSpec", "ProbeVariant", "ReferenceKernels", "ReferenceSpec",
    "PROFILE_RANGE", "ProfileSpec", "ReferenceTrial", "SanitizeRan", "SanitizeSpec", "ScratchNeed", "Semantics", "TensorInfo", "TimingResult", "TimingSettings", "TrialSpec",
    "TrialStart", "TuneSpec", "TuneStart", "Tuned", "Weights", "Work", "WorkCount",
]
