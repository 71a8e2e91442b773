"""GPU timing — protocol rule 10; integrity #3, #6, #14, #16.

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
- The number of repetitions follows the call's cost (``timing_target_ms``), within ``[min_reps, max_reps]``, and
  stops earlier once the median is stable (``timing_stable_rel``: its standard error, estimated from the
  interquartile range, at most that share of the median; checked after each chunk); the result is the median,
  with min and the interquartile range.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.hardware import gpu_lock
from kernelwright.jobs import Measurement


@dataclass(frozen=True)
class Clock:
    """Timing functions as they were before any candidate code ran."""

    event_cls: Any
    record: Callable[..., Any]
    elapsed_time: Callable[..., float]
    event_synchronize: Callable[..., Any]
    device_synchronize: Callable[..., Any]
    perf_counter: Callable[[], float]
    sleep: Callable[[int], Any] | None  # torch.cuda._sleep (device-side spin), where this torch has it

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
            sleep=getattr(torch.cuda, "_sleep", None),
        )

    def event(self) -> Any:
        return self.event_cls(enable_timing=True)


_CHUNK = 100  # timed calls queued behind one device-side sleep
_MAX_SLEEP_MS = 200.0
_MIN_SLEEP_MS = 0.5  # absorbs the host's jitter at the start of a chunk


def _cycles_per_ms(clock: Clock) -> float:
    """Cycles of ``torch.cuda._sleep`` per millisecond, measured (0 where unavailable: then no sleep-ahead).

    Measured rather than taken from the nominal clock: the SM clock under load differs from the reported one, and
    a sleep that is too short lets the device catch up with the host again."""
    if clock.sleep is None:
        return 0.0
    cycles = 2_000_000
    start, end = clock.event(), clock.event()
    clock.sleep(cycles // 10)  # first call: module load
    clock.record(start)
    clock.sleep(cycles)
    clock.record(end)
    clock.event_synchronize(end)
    ms = clock.elapsed_time(start, end)
    return cycles / ms if ms > 0 else 0.0


def l2_flush_bytes(device: torch.device) -> int:
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 64 * 1024 * 1024
    return max(2 * l2, 256 * 1024 * 1024)  # at least triton.testing.do_bench's 256 MB


def _alone_on_device(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with the GPU lock held exclusively (a no-op without a lock)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with gpu_lock.exclusive():
            return fn(*args, **kwargs)

    return wrapper


@_alone_on_device
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
    keep_samples: bool = False,
    stable_rel: float = 0.0,
) -> tuple[Measurement, dict[int, Any]]:
    """Time ``call(set_index)``; return the measurement and the last output of each input set.

    ``before_each`` runs on the host before every timed call, outside the timed interval (the verifier uses it to
    return persisting L2 lines to normal). ``stable_rel`` (0: off) ends the timing after the first chunk at which
    the median's standard error is at most that share of it (:func:`median_is_stable`).

    When a GPU lock is in use (a parallel bench, hardware/gpu_lock.py) the device is this process's alone from the
    warm-up to the last timed call (:func:`_alone_on_device`)."""
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

    # A probe of ten calls as they will be timed: the flush's own cost (the wall-time check subtracts it), the
    # device time of one call, and the host's time to queue one (flush launch and event records included). The
    # probe is queued behind a sleep too, or a host-bound call would read its host time as device time.
    cycles_per_ms = _cycles_per_ms(clock)
    probe = [(clock.event(), clock.event(), clock.event(), clock.event()) for _ in range(10)]
    host_times = []
    if cycles_per_ms:
        clock.sleep(int(min(_MAX_SLEEP_MS, max(1.0, 3 * len(probe) * estimate_ms)) * cycles_per_ms))
    for i, (f0, f1, s0, s1) in enumerate(probe):
        h0 = clock.perf_counter()
        if before_each is not None:
            before_each()
        clock.record(f0)
        flush.zero_()
        clock.record(f1)
        clock.record(s0)
        call(i % n_sets)
        clock.record(s1)
        host_times.append((clock.perf_counter() - h0) * 1e3)
    clock.device_synchronize()
    flush_ms = statistics.median(clock.elapsed_time(f0, f1) for f0, f1, _, _ in probe)
    device_ms = statistics.median(clock.elapsed_time(s0, s1) for _, _, s0, s1 in probe)
    host_ms = statistics.median(host_times)

    reps = int(min(max_reps, max(min_reps, target_ms / max(estimate_ms, device_ms + flush_ms))))
    starts = [clock.event() for _ in range(reps)]
    ends = [clock.event() for _ in range(reps)]
    last: dict[int, Any] = {}
    chunk = min(reps, _CHUNK)
    sleeps = [(clock.event(), clock.event()) for _ in range(0, reps, chunk)]
    clock.device_synchronize()
    wall_ms = 0.0
    wall0: float | None = None  # start of the stretch the wall clock is counting (the looks at the median are not)
    done = reps
    for c, first in enumerate(range(0, reps, chunk)):
        if wall0 is None:
            wall0 = clock.perf_counter()
        n = min(chunk, reps - first)
        # Hold the device back while the host queues this chunk, so each timed interval is device time and not
        # the host's launch latency (on the H200, 2026-11-30, a 0.07 ms softmax with ~0.12 ms of host work per
        # call read 25% slow, with a tenfold IQR, when the device waited for the host). The sleep covers only the
        # host's lag plus half its queueing time: a longer one leaves the device idle, and an idle GPU boosts its
        # clock (a 0.2 ms GEMM read 9% fast against do_bench with a sleep sized to the whole chunk).
        clock.record(sleeps[c][0])
        if cycles_per_ms:
            lag_ms = 1.5 * n * host_ms - n * (device_ms + flush_ms)
            sleep_ms = min(_MAX_SLEEP_MS, max(_MIN_SLEEP_MS, lag_ms))
            clock.sleep(int(sleep_ms * cycles_per_ms))
        clock.record(sleeps[c][1])
        for i in range(first, first + n):
            if before_each is not None:
                before_each()
            flush.zero_()
            clock.record(starts[i])
            last[i % n_sets] = call(i % n_sets)
            clock.record(ends[i])
        if not stable_rel or first + n >= reps:
            continue
        # A chunk's look at the median: the device finishes the chunk (every stream) before its samples are read,
        # and the look itself is off the wall clock, so the next chunk starts with the device idle behind its sleep.
        clock.device_synchronize()
        wall_ms += (clock.perf_counter() - wall0) * 1e3
        wall0 = None
        so_far = [clock.elapsed_time(s, e) for s, e in zip(starts[:first + n], ends[:first + n])]
        if first + n >= min_reps and median_is_stable(so_far, stable_rel):
            done = first + n
            break
    clock.device_synchronize()  # every stream, not only the current one
    if wall0 is not None:
        wall_ms += (clock.perf_counter() - wall0) * 1e3
    slept_ms = sum(clock.elapsed_time(s, e) for s, e in sleeps[:-(-done // chunk)])
    samples = tuple(clock.elapsed_time(s, e) for s, e in zip(starts[:done], ends[:done]))
    reps = done
    unexplained = max(0.0, wall_ms - slept_ms - sum(samples) - reps * flush_ms) / reps
    # The raw samples travel with the summary: the parent recomputes it from them (a candidate's process can patch
    # anything, statistics.median included).
    measurement = Measurement.from_samples(samples, host_ms_per_call=(wall_ms - slept_ms) / reps, flush_ms=flush_ms,
                                           unexplained_ms_per_call=unexplained, keep_samples=keep_samples)
    return measurement, last


def median_is_stable(samples_ms: list[float], rel: float) -> bool:
    """Whether the median of ``samples_ms`` is known to within ``rel`` of itself: its standard error, for a spread
    estimated robustly from the interquartile range (sigma ~ IQR / 1.349; the median's error ~ 1.2533 sigma /
    sqrt(n)), at most ``rel`` times the median. Plain arithmetic: nothing a candidate's process patches is called."""
    times = sorted(samples_ms)
    n = len(times)
    if n < 8:
        return False
    median, q1, q3 = times[n // 2], times[n // 4], times[(3 * n) // 4]
    return median > 0 and 0.929 * (q3 - q1) / n ** 0.5 <= rel * median


def side_stream_suspected(m: Measurement) -> bool:
    """Work the timed stream did not see: per call, more than half the measured time and more than 20 us."""
    return m.unexplained_ms_per_call > max(0.5 * m.median_ms, 0.02)
