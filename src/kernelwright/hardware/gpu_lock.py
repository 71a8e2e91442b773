"""Sharing one GPU between several verifications without letting them disturb each other's timings.

A benchmark of many problems on one GPU spends most of its wall time on work that needs the device only lightly or
not at all: starting processes, importing torch, capturing, compiling Triton kernels and Inductor graphs, writing
and comparing outputs. Several problems can do that side by side. What must never overlap anything is a
*measurement*: two processes' kernels are time-sliced on the device, so a timed call would absorb another process's
work.

This module is a writer-preferring reader-writer lock between processes, on two files (``fcntl.flock``):

- **shared** — any GPU work that is not a measurement (correctness trials, reference outputs, profiling). Many
  processes hold it together.
- **exclusive** — a measurement (the verifier's timed calls, the baselines' compile-time autotuning and timing,
  the tuning worker's timing, the device calibration). Nothing else runs on the device meanwhile: the holder waits
  until every shared holder has synchronised its device and let go, and no new shared holder starts while an
  exclusive one waits (the *gate* file), so measurements are never starved.

The lock is off unless ``KERNELWRIGHT_GPU_LOCK`` names a lock path (``kernelwright``'s parallel bench sets it for
its workers; their isolated children inherit it). Off, every function here does nothing. A process that dies
holding the lock releases it (the kernel drops ``flock`` locks with the file descriptor).

In a child job the lock is held *shared* from the job's start (:func:`hold_shared`) and :func:`exclusive` upgrades
it for a measurement (let go, wait, measure, let go, share again); before letting go the device is synchronised,
so no queued kernel of this process runs into someone else's measurement.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import inspect
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

ENV = "KERNELWRIGHT_GPU_LOCK"  # config's gpu_lock: children inherit it, so bench sets the variable
# Where the long holds are logged instead of beside the lock (``<lock>.holds``): a bench task's own log, so that the
# task can say where its time went wherever it ran (a Ray worker on another machine).
HOLDS_ENV = "KERNELWRIGHT_GPU_LOCK_HOLDS"  # config's gpu_lock_holds
HOLD_LOG_MIN_S = 1.0  # holds at least this long are written to the lock's ``.holds`` log (where the time went)

_NONE, _SHARED, _EXCLUSIVE = 0, 1, 2


class _Lock:
    def __init__(self, path: str) -> None:
        self.path = path
        self.rw = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.gate = os.open(path + ".gate", os.O_RDWR | os.O_CREAT, 0o600)
        self.mode = _NONE
        self.waited_s = 0.0  # time spent waiting for the lock, for the record
        self.label = "orchestrator"  # who holds it, in the hold log: a child job names itself
        self._held_since = 0.0

    def _sync(self) -> None:
        # Queued kernels must finish before another process may measure. Only where CUDA was initialised here:
        # synchronising otherwise would create a context just to let go of a lock.
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def acquire(self, mode: int) -> None:
        if mode == self.mode:
            return
        self.release()
        started = time.monotonic()
        fcntl.flock(self.gate, fcntl.LOCK_EX)  # behind any waiting measurement
        if mode == _SHARED:
            fcntl.flock(self.rw, fcntl.LOCK_SH)
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(self.rw, fcntl.LOCK_EX)  # the gate stays held: no new sharer while this one measures
        self._held_since = time.monotonic()
        self.waited_s += self._held_since - started
        self.mode = mode

    def measurement_waiting(self) -> bool:
        """Whether another process holds the gate: a measurement waiting for the sharers to let go (or, for a
        moment, a sharer on its way in). Only meaningful while this process holds the lock shared."""
        try:
            fcntl.flock(self.gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.gate, fcntl.LOCK_UN)
        return False

    def release(self) -> None:
        if self.mode == _NONE:
            return
        self._sync()
        fcntl.flock(self.rw, fcntl.LOCK_UN)
        if self.mode == _EXCLUSIVE:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        self._log_hold(time.monotonic() - self._held_since)
        self.mode = _NONE

    def _log_hold(self, seconds: float) -> None:
        """One JSON line per long hold (a single write under PIPE_BUF: atomic between processes)."""
        if seconds < HOLD_LOG_MIN_S:
            return
        import json

        line = json.dumps({"pid": os.getpid(), "job": self.label, "mode": "exclusive" if self.mode == _EXCLUSIVE
                           else "shared", "s": round(seconds, 2), "end": round(time.time(), 2)}) + "\n"
        with contextlib.suppress(OSError):
            fd = os.open(hold_log(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)


_lock: _Lock | None = None


def _path() -> str:
    from kernelwright.config import config

    return config.gpu_lock or ""


def _get() -> _Lock | None:
    global _lock
    path = _path()
    if not path:
        return None
    if _lock is None or _lock.path != path:
        _lock = _Lock(path)
    return _lock


def enabled() -> bool:
    return bool(_path())


def hold_shared(label: str = "") -> None:
    """Hold the lock shared from now on (a child job's start, before CUDA is touched); ``label`` names the job in
    the hold log."""
    lock = _get()
    if lock is not None:
        if label:
            lock.label = label
        lock.acquire(_SHARED)


def hold_exclusive(label: str = "") -> None:
    """Hold the lock exclusively from now on: a whole job with the device to itself (the re-run of a job that ran
    out of memory beside others). The measurements inside it keep the hold (:func:`exclusive` returns to it), and
    :func:`give_way` and :func:`idle` leave it alone."""
    lock = _get()
    if lock is not None:
        if label:
            lock.label = label
        lock.acquire(_EXCLUSIVE)


def hold_log(path: str) -> str:
    """The file the long holds of the lock at ``path`` are logged to (``HOLDS_ENV`` where it is set)."""
    from kernelwright.config import config

    return config.gpu_lock_holds or path + ".holds"


def hold_summary(path: str) -> dict[str, dict[str, float]]:
    """The hold log beside the lock at ``path``, summed (:func:`read_holds`)."""
    return read_holds(path + ".holds")


def read_holds(log: str) -> dict[str, dict[str, float]]:
    """A hold log summed: {"job mode": {"holds", "total_s", "max_s"}}, longest total first — which jobs kept a
    parallel bench's measurements (exclusive) and everyone else (shared) waiting."""
    import json

    try:
        with open(log) as fh:
            lines = fh.readlines()
    except OSError:
        return {}
    sums: dict[str, dict[str, float]] = {}
    for line in lines:
        try:
            hold = json.loads(line)
            key, seconds = f"{hold['job']} {hold['mode']}", float(hold["s"])
        except (ValueError, KeyError, TypeError):
            continue
        entry = sums.setdefault(key, {"holds": 0, "total_s": 0.0, "max_s": 0.0})
        entry["holds"] += 1
        entry["total_s"] = round(entry["total_s"] + seconds, 2)
        entry["max_s"] = max(entry["max_s"], seconds)
    return merge_summaries(sums)


def merge_summaries(*summaries: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Hold summaries added up (several GPUs' locks, several tasks' logs), longest total first."""
    sums: dict[str, dict[str, float]] = {}
    for summary in summaries:
        for key, part in summary.items():
            entry = sums.setdefault(key, {"holds": 0, "total_s": 0.0, "max_s": 0.0})
            entry["holds"] += part.get("holds", 0)
            entry["total_s"] = round(entry["total_s"] + part.get("total_s", 0.0), 2)
            entry["max_s"] = max(entry["max_s"], part.get("max_s", 0.0))
    return dict(sorted(sums.items(), key=lambda kv: -kv[1]["total_s"]))


def release() -> None:
    """Let go of the lock entirely (the device synchronised first)."""
    lock = _get()
    if lock is not None:
        lock.release()


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """Run the block with the device to this process alone; afterwards the lock returns to its previous mode."""
    lock = _get()
    if lock is None:
        yield
        return
    before = lock.mode
    lock.acquire(_EXCLUSIVE)
    try:
        yield
    finally:
        if before != _EXCLUSIVE:
            lock.release()
            if before == _SHARED:
                lock.acquire(_SHARED)


_SHARERS = 0  # threads of this process inside sharing() (a bench's verifies judge side by side)
_SHARERS_LOCK = threading.Lock()


@contextlib.contextmanager
def sharing() -> Iterator[None]:
    """Hold the lock shared for the block (the verifier's own device work in the orchestrating process: judging
    outputs on the GPU); the last of this process's threads to leave lets go (its device synchronised first)."""
    global _SHARERS
    lock = _get()
    if lock is None:
        yield
        return
    with _SHARERS_LOCK:
        _SHARERS += 1
        if lock.mode == _NONE:
            lock.acquire(_SHARED)
    try:
        yield
    finally:
        with _SHARERS_LOCK:
            _SHARERS -= 1
            if _SHARERS == 0 and lock.mode == _SHARED:
                lock.release()


def give_way() -> bool:
    """A point between steps of a job's shared device work (a trial, a configuration, a baseline): where a
    measurement is waiting for the device, let it go first — synchronise, let go, queue behind it, share again.
    Without these a sharer holds the device for its whole job and every measurement of a parallel bench waits for
    the longest sharer: on the H200 (run 57, 2026-12-04) references held it shared up to 13 s at a stretch and the
    verifies' measurements waited 25-86 s each. True where it gave way. Only for a job's single thread (the
    orchestrator's judging threads use :func:`sharing`)."""
    lock = _get()
    if lock is None or lock.mode != _SHARED or not lock.measurement_waiting():
        return False
    lock.release()
    lock.acquire(_SHARED)
    return True


@contextlib.contextmanager
def idle() -> Iterator[None]:
    """Let go of a shared hold for host-only work (writing outputs to disk), so a waiting measurement can start."""
    lock = _get()
    if lock is None or lock.mode != _SHARED:
        yield
        return
    lock.release()
    try:
        yield
    finally:
        lock.acquire(_SHARED)


def hook_inductor_benchmarks() -> bool:
    """Make Inductor's own autotuning benchmarks (``torch.compile``'s max-autotune modes) measurements: each runs with
    the device to this process alone, while the rest of a compile (tracing, code generation, Triton builds: host
    work, tens of seconds) stays shared. True where the benchmarks could be reached (or there is no lock): where not,
    the caller holds the lock exclusively through the whole compile instead, as before.

    Holding it through a whole max-autotune compile made every other job wait: on the H200 (2026-12-02, three
    problems side by side) the baselines phase took 155-178 s a verify, of which ~165 s were waits for the lock."""
    global _inductor_hooked
    if _get() is None or _inductor_hooked:
        return True
    try:
        from torch._inductor.runtime import benchmarking
    except ImportError:
        return False
    setter = getattr(benchmarking, "set_gpu_benchmark_lock_context", None)
    if setter is not None:  # torch >= 2.13: the harness hook every GPU benchmark of Inductor's goes through
        setter(exclusive)
        _inductor_hooked = True
        return True
    # Older torch (2.11 on the H200): wrap each benchmarker class's own GPU benchmark methods.
    for cls in list(vars(benchmarking).values()):
        if isinstance(cls, type) and cls.__module__ == benchmarking.__name__:
            for name, fn in list(vars(cls).items()):
                if name.startswith("benchmark_gpu") and inspect.isfunction(fn):
                    setattr(cls, name, _exclusively(fn))
                    _inductor_hooked = True
    return _inductor_hooked


def _exclusively(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with exclusive():
            return fn(*args, **kwargs)

    return call


_inductor_hooked = False


def waited_s() -> float:
    lock = _get()
    return lock.waited_s if lock is not None else 0.0
