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
import os
import time
from collections.abc import Iterator

ENV = "KERNELWRIGHT_GPU_LOCK"

_NONE, _SHARED, _EXCLUSIVE = 0, 1, 2


class _Lock:
    def __init__(self, path: str) -> None:
        self.path = path
        self.rw = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.gate = os.open(path + ".gate", os.O_RDWR | os.O_CREAT, 0o600)
        self.mode = _NONE
        self.waited_s = 0.0  # time spent waiting for the lock, for the record

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
        self.waited_s += time.monotonic() - started
        self.mode = mode

    def release(self) -> None:
        if self.mode == _NONE:
            return
        self._sync()
        fcntl.flock(self.rw, fcntl.LOCK_UN)
        if self.mode == _EXCLUSIVE:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        self.mode = _NONE


_lock: _Lock | None = None


def _get() -> _Lock | None:
    global _lock
    path = os.environ.get(ENV, "")
    if not path:
        return None
    if _lock is None or _lock.path != path:
        _lock = _Lock(path)
    return _lock


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def hold_shared() -> None:
    """Hold the lock shared from now on (a child job's start, before CUDA is touched)."""
    lock = _get()
    if lock is not None:
        lock.acquire(_SHARED)


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


def waited_s() -> float:
    lock = _get()
    return lock.waited_s if lock is not None else 0.0
