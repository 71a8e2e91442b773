"""verify/child/timing.py's measure on a clock of the test's own (no GPU): the number of timed repetitions follows
the call's cost within [min_reps, max_reps] and stops early once the median is stable, never before min_reps."""

from __future__ import annotations

import itertools
import random

import torch

from kernelwright.verify.child.timing import Clock, measure, median_is_stable


class _Event:
    def __init__(self, enable_timing: bool = True) -> None:
        self.t: float | None = None


class _Device:
    """A device whose every call takes a drawn number of milliseconds, in virtual time."""

    def __init__(self, draw) -> None:
        self.now = 0.0
        self.draw = draw
        self.calls = 0

    def call(self, set_index: int) -> int:
        self.calls += 1
        self.now += self.draw()
        return set_index

    def clock(self) -> Clock:
        def record(event: _Event) -> None:
            event.t = self.now

        def elapsed(a: _Event, b: _Event) -> float:
            assert a.t is not None and b.t is not None, "an event read before it was recorded"
            return b.t - a.t

        return Clock(event_cls=_Event, record=record, elapsed_time=elapsed, event_synchronize=lambda e: None,
                     device_synchronize=lambda: None, perf_counter=__import__("time").perf_counter, sleep=None)


def _measure(device: _Device, *, stable_rel: float, min_reps: int = 20, max_reps: int = 2000):
    return measure(device.call, 2, device.clock(), device=torch.device("cpu"), min_reps=min_reps,
                   max_reps=max_reps, target_ms=600.0, warmup_ms=0.0, flush=torch.zeros(4), stable_rel=stable_rel)


def test_a_steady_call_stops_after_its_first_chunk_and_a_noisy_one_runs_to_its_cost_bound() -> None:
    rng = random.Random(1)
    steady = _Device(lambda: 1.0 + rng.uniform(-0.001, 0.001))  # 1 ms a call: 600 reps by cost
    m, last = _measure(steady, stable_rel=0.002)
    assert m.reps == 100 and abs(m.median_ms - 1.0) < 0.01 and set(last) == {0, 1}
    halves = itertools.cycle([0.5, 1.5])  # a median of 1 ms (600 reps by cost), an IQR of 1 ms
    noisy = _Device(lambda: next(halves))
    assert _measure(noisy, stable_rel=0.002)[0].reps == 600
    # Off, the steady call runs to its cost bound as before.
    assert _measure(_Device(lambda: 1.0), stable_rel=0.0)[0].reps == 600


def test_never_fewer_than_min_reps() -> None:
    m, _ = _measure(_Device(lambda: 1.0), stable_rel=0.5, min_reps=250)
    assert m.reps == 300  # the first look at or past 250 calls: after the third chunk


def test_the_median_is_stable_when_its_standard_error_is_small_enough() -> None:
    assert not median_is_stable([1.0] * 7, 0.01)  # too few to say
    assert median_is_stable([1.0] * 100, 0.0001)
    spread = [1.0 + 0.1 * (i % 10) / 10 for i in range(100)]  # IQR ~0.05: standard error ~0.0046
    assert median_is_stable(spread, 0.005) and not median_is_stable(spread, 0.004)
