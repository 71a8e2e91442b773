"""Records more than one job speaks: a measurement, a kernel the candidate ran, how to time, a trial of the plan,
where a job ran."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from kernelwright.isolation.protocol import Record, Report


@dataclass(frozen=True, kw_only=True)
class Measurement(Record):
    """One timed call's statistics (verify/child/timing.py measures it): the candidate's, a baseline's, a tuned
    one's."""

    DERIVED: ClassVar[tuple[str, ...]] = ("iqr_ms",)
    OMIT_DEFAULT: ClassVar[tuple[str, ...]] = ("samples_ms",)

    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    mean_ms: float
    reps: int
    host_ms_per_call: float  # wall time of the timed batch / reps (flushes included)
    flush_ms: float  # median time of one L2 flush
    unexplained_ms_per_call: float  # wall time the events and flushes do not account for
    samples_ms: tuple[float, ...] = ()  # every timed call's own time, in call order (the candidate's timing)

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @classmethod
    def from_samples(cls, samples_ms: tuple[float, ...], *, host_ms_per_call: float, flush_ms: float,
                     unexplained_ms_per_call: float, keep_samples: bool = True) -> Measurement:
        """The statistics of ``samples_ms``, computed here (plain arithmetic: no module a candidate could patch)."""
        times = sorted(float(t) for t in samples_ms)
        if not times:
            raise ValueError("no samples to summarise")
        return cls(median_ms=_quantile(times, 0.5), min_ms=times[0], q1_ms=_quantile(times, 0.25),
                   q3_ms=_quantile(times, 0.75), mean_ms=math.fsum(times) / len(times), reps=len(times),
                   host_ms_per_call=host_ms_per_call, flush_ms=flush_ms,
                   unexplained_ms_per_call=unexplained_ms_per_call,
                   samples_ms=tuple(float(t) for t in samples_ms) if keep_samples else ())

    def summary_matches(self, other: Measurement, rel: float = 1e-9) -> bool:
        """The same median, quartiles, minimum, mean and count (``other``: recomputed from the samples)."""
        pairs = [(self.median_ms, other.median_ms), (self.min_ms, other.min_ms), (self.q1_ms, other.q1_ms),
                 (self.q3_ms, other.q3_ms), (self.mean_ms, other.mean_ms)]
        return self.reps == other.reps and all(math.isclose(a, b, rel_tol=rel, abs_tol=1e-12) for a, b in pairs)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True, kw_only=True)
class KernelRecord(Record):
    """One kernel the candidate's call ran (verify/child/launches.py lists them)."""

    name: str
    origin: str  # "own" or "library"
    source: str  # "triton", "extension", "aten", "cuda" (a device kernel from the profiler)
    launches: int
    device_time_us: float | None  # None where not measured (CPU)
    streams: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TimingSettings(Record):
    """How a job times its calls (verify/child/timing.py's ``measure``), from kernelwright's configuration."""

    min_reps: int
    max_reps: int
    target_ms: float
    warmup_ms: float
    stable_rel: float = 0.0  # stop once the median's standard error is at most this share of it (0: never early)

    @classmethod
    def from_config(cls, **overrides: Any) -> TimingSettings:
        from kernelwright.config import config

        return cls(**{"min_reps": config.timing_min_reps, "max_reps": config.timing_max_reps,
                      "target_ms": config.timing_target_ms, "warmup_ms": config.timing_warmup_ms,
                      "stable_rel": config.timing_stable_rel, **overrides})


@dataclass(frozen=True, kw_only=True)
class DeviceFacts(Report):
    event: ClassVar[str] = "device"
    facts: dict[str, Any]  # verify/runtime.device_facts


RANDOM = "random"  # fresh get_inputs() under a new seed, in new buffers
REWRITE = "rewrite"  # new values written in place into an earlier trial's buffers (same addresses)
REPOISON = "repoison"  # an earlier trial's inputs again, with a different poison pattern in free memory
# An earlier random trial's inputs with a few elements changed (verify/sparse.py), written into that trial's own
# buffers through .data (same addresses, version counter unchanged) or into new buffers: an answer cached by a few
# probed elements, or by the data pointer and probes, is stale there (integrity #34).
SPARSE_IN_PLACE = "sparse_in_place"
SPARSE_COPY = "sparse_copy"
SPARSE = (SPARSE_IN_PLACE, SPARSE_COPY)
SCALED = "scaled"  # float inputs multiplied by a large factor
HEAVY_TAILED = "heavy_tailed"  # float inputs multiplied by log-normal noise (outliers, same signs)
SHAPE = "shape"  # the problem's size globals changed (a second shape)

POISON_NAN = "nan"  # free memory and torch.empty filled with NaN (0xFF bytes)
POISON_FINITE = "finite"  # free memory filled with a finite non-zero pattern (0x41 bytes), no NaN fill


@dataclass(frozen=True, kw_only=True)
class TrialSpec(Record):
    """One planned correctness trial (verify/trials.py plans them; the kinds and poisons are named there)."""

    index: int
    kind: str
    seed: int
    source: int | None = None  # REWRITE, SPARSE_IN_PLACE: whose buffers; REPOISON, SPARSE_*: whose inputs
    poison: str = POISON_NAN

    @property
    def needs_own_reference(self) -> bool:
        return self.kind != REPOISON

    @property
    def in_place(self) -> bool:
        """Whether the candidate writes this trial's inputs into its source trial's buffers instead of new ones."""
        return self.kind in (REWRITE, SPARSE_IN_PLACE)


@dataclass(frozen=True, kw_only=True)
class TensorInfo(Record):
    """A tensor as a job describes it (verify/tensors.describe): the tensor itself is a file, or not sent."""

    shape: tuple[int, ...]
    dtype: str  # "float32", "bfloat16" (torch's name without "torch.")
    stride: tuple[int, ...] = ()
    device: str = "cpu"
    contiguous: bool = True

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def text(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


@dataclass(frozen=True, kw_only=True)
class WorkCount(Record):
    """What the reference's forward does, counted once (verify/roofline.py counts it; the roofline prices it)."""

    matmul_flops: dict[str, float]  # operand dtype -> FLOPs of mm/bmm/addmm/conv/attention
    elementwise_flops: float  # estimate: one op per element of each non-matmul op's largest operand
    input_bytes: float  # inputs the output depends on (each once)
    ignored_inputs: tuple[int, ...] = ()  # indices of inputs the output does not depend on
    output_bytes: float
    parameter_bytes: float
    kinds: tuple[str, ...] = ()  # "matmul", "conv", "attention", "softmax" seen among the ops, sorted
    dtypes: tuple[str, ...] = ()

    @property
    def bytes(self) -> float:
        return self.input_bytes + self.output_bytes + self.parameter_bytes

    @property
    def total_matmul_flops(self) -> float:
        return float(sum(self.matmul_flops.values()))
