"""GPU timing — DESIGN.md rule 10; KNOWN_HACKS #3, #6, #14, #16.

- The timing functions are captured (:class:`Clock`) *before* the candidate is imported, and used from the
  capture; the integrity monitor checks that nobody replaced the originals.
- Before every timed call the L2 is flushed by writing a buffer of at least twice its size; the flush is outside
  the timed interval (its own events measure it).
- Inputs rotate among several sets (already on the device) so no call reuses the previous call's cache lines.
- Calls are queued back to back, as ``triton.testing.do_bench`` does, in chunks held behind a device-side sleep
  (``torch.cuda._sleep``) long enough for the host to queue the whole chunk: the events then measure device time,
  not the host's launch latency, however much Python a candidate's forward runs. The batch ends with a
  *device-wide* synchronisation (every stream), and the wall time of the whole batch (less the sleeps) is compared
  with the sum of event intervals plus flushes: device work the events did not see (another stream, a thread)
  shows up as ``unexplained_ms_per_call``.
- The number of repetitions follows the call's cost (``timing_target_ms``), within ``[min_reps, max_reps]``; the
  result is the median, with min and the interquartile range.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Clock:
    """Timing functions as they were before any candidate code ran."""

    event_cls: Any
    record: Callable[..., Any]
    elapsed_time: Callable[..., float]
    event_synchronize: Callable[..., Any]
    device_synchronize: Callable[..., Any]
    perf_counter: Callable[[], float]

    @classmethod
    def capture(cls) -> Clock:
        import time

        return cls(
            event_cls=torch.cuda.Event,
            record=torch.cuda.Event.record,
            elapsed_time=torch.cuda.Event.elapsed_time,
            event_synchronize=torch.cuda.Event.synchronize,
            device_synchronize=torch.cuda.synchronize,
            perf_counter=time.perf_counter,
        )

    def event(self) -> Any:
        return self.event_cls(enable_timing=True)


@dataclass(frozen=True, kw_only=True)
class Measurement:
    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    mean_ms: float
    reps: int
    host_ms_per_call: float  # wall time of the timed batch / reps (flushes included)
    flush_ms: float  # median time of one L2 flush
    unexplained_ms_per_call: float  # wall time the events and flushes do not account for

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["iqr_ms"] = self.iqr_ms
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        data = {k: v for k, v in data.items() if k != "iqr_ms"}
        return cls(**data)


_CHUNK = 100  # timed calls queued behind one device-side sleep
_MAX_SLEEP_MS = 200.0
_HOST_OVERHEAD_MS = 0.05  # flush launch and event records, per call


def _cycles_per_ms(device: torch.device) -> float:
    """SM clock cycles per millisecond for ``torch.cuda._sleep`` (0 where unavailable: then no sleep-ahead)."""
    if not hasattr(torch.cuda, "_sleep"):
        return 0.0
    khz = getattr(torch.cuda.get_device_properties(device), "clock_rate", 0) or 1_500_000
    return float(khz)


def _quantile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def l2_flush_bytes(device: torch.device) -> int:
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 64 * 1024 * 1024
    return max(2 * l2, 256 * 1024 * 1024)  # at least triton.testing.do_bench's 256 MB


def measure(
    call: Callable[[int], Any],
    n_sets: int,
    clock: Clock,
    *,
    device: torch.device,
    min_reps: int,
    max_reps: int,
    target_ms: float,
    warmup_ms: float,
    flush: torch.Tensor | None = None,
    before_each: Callable[[], Any] | None = None,
) -> tuple[Measurement, dict[int, Any]]:
    """Time ``call(set_index)``; return the measurement and the last output of each input set.

    ``before_each`` runs on the host before every timed call, outside the timed interval (the verifier uses it to
    return persisting L2 lines to normal)."""
    if flush is None:
        flush = torch.empty(l2_flush_bytes(device) // 4, dtype=torch.int32, device=device)

    # Warm-up: compile, autotune, handles, allocator — and an estimate of one call's cost.
    clock.device_synchronize()
    t0 = clock.perf_counter()
    k = 0
    while k < 3 or ((clock.perf_counter() - t0) * 1e3 < warmup_ms and k < 1000):
        call(k % n_sets)
        k += 1
    clock.device_synchronize()
    estimate_ms = max((clock.perf_counter() - t0) * 1e3 / k, 1e-3)

    # The flush's own cost, so the wall-time check can subtract it.
    flush_events = [(clock.event(), clock.event()) for _ in range(10)]
    for start, end in flush_events:
        clock.record(start)
        flush.zero_()
        clock.record(end)
    clock.device_synchronize()
    flush_ms = statistics.median(clock.elapsed_time(s, e) for s, e in flush_events)

    reps = int(min(max_reps, max(min_reps, target_ms / (estimate_ms + flush_ms))))
    starts = [clock.event() for _ in range(reps)]
    ends = [clock.event() for _ in range(reps)]
    last: dict[int, Any] = {}
    chunk = min(reps, _CHUNK)
    sleeps = [(clock.event(), clock.event()) for _ in range(0, reps, chunk)]
    cycles_per_ms = _cycles_per_ms(device)
    clock.device_synchronize()
    wall0 = clock.perf_counter()
    for c, first in enumerate(range(0, reps, chunk)):
        n = min(chunk, reps - first)
        # Hold the device back while the host queues this chunk, so each timed interval is device time and not
        # the host's launch latency (on the H200, 2026-11-30, a 0.07 ms softmax with ~0.12 ms of host work per
        # call read 25% slow, with a tenfold IQR, when the device waited for the host).
        clock.record(sleeps[c][0])
        if cycles_per_ms:
            sleep_ms = min(_MAX_SLEEP_MS, 1.5 * n * (estimate_ms + _HOST_OVERHEAD_MS))
            torch.cuda._sleep(int(sleep_ms * cycles_per_ms))
        clock.record(sleeps[c][1])
        for i in range(first, first + n):
            if before_each is not None:
                before_each()
            flush.zero_()
            clock.record(starts[i])
            last[i % n_sets] = call(i % n_sets)
            clock.record(ends[i])
    clock.device_synchronize()  # every stream, not only the current one
    wall_ms = (clock.perf_counter() - wall0) * 1e3
    slept_ms = sum(clock.elapsed_time(s, e) for s, e in sleeps)
    times = sorted(clock.elapsed_time(s, e) for s, e in zip(starts, ends))
    unexplained = max(0.0, wall_ms - slept_ms - sum(times) - reps * flush_ms) / reps
    measurement = Measurement(
        median_ms=statistics.median(times),
        min_ms=times[0],
        q1_ms=_quantile(times, 0.25),
        q3_ms=_quantile(times, 0.75),
        mean_ms=statistics.fmean(times),
        reps=reps,
        host_ms_per_call=(wall_ms - slept_ms) / reps,
        flush_ms=flush_ms,
        unexplained_ms_per_call=unexplained,
    )
    return measurement, last


def side_stream_suspected(m: Measurement) -> bool:
    """Work the timed stream did not see: per call, more than half the measured time and more than 20 us."""
    return m.unexplained_ms_per_call > max(0.5 * m.median_ms, 0.02)
