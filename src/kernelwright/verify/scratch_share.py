"""The scratch space shared by the verifies of one machine (a parallel bench's workers, two CLI verifies at once).

Every verify holds a lock on ``<scratch>/kernelwright-scratch.lock`` *shared* while its files exist. A verify
whose trials' files cannot all fit (verify/groups.py) lets go and waits to hold it *exclusively*: then no other
verify's files are there or on their way, and its reference job measures the whole room again, so a big problem
is planned against what the machine really has rather than against a room its neighbours are about to fill (four
level-1 problems of 25 GB a trial side by side would otherwise each plan most of /dev/shm, and the out-of-memory
killer would end the lot). A waiting exclusive holder goes first: a verify that starts meanwhile waits for it (a
*gate* file, as :mod:`kernelwright.hardware.gpu_lock` keeps measurements from starving).

``flock`` locks go with their descriptors: a verify that dies lets go. Waits end at the caller's deadline.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from pathlib import Path

from kernelwright.deadline import Deadline

LOCK_NAME = "kernelwright-scratch.lock"
_POLL_S = 0.1


class ScratchShare:
    """One verify's hold on its scratch space's lock (``root``: the scratch folder, "" for the system's)."""

    def __init__(self, root: str | None = None) -> None:
        base = Path(root or tempfile.gettempdir())
        self.path = base / LOCK_NAME
        self.rw = self.gate = -1
        self.exclusive = False
        self.waited_s = 0.0
        try:
            self.rw = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            self.gate = os.open(f"{self.path}.gate", os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:  # a read-only scratch folder fails later, with its own message; no lock then
            self.close()

    def share(self, deadline: Deadline | None = None) -> bool:
        """Hold the lock shared, behind any verify waiting to hold it exclusively; False where the deadline came
        first."""
        if self.rw < 0:
            return True
        if not self._wait(self.gate, fcntl.LOCK_SH, deadline):
            return False
        try:
            return self._wait(self.rw, fcntl.LOCK_SH, deadline)
        finally:
            fcntl.flock(self.gate, fcntl.LOCK_UN)

    def take_alone(self, deadline: Deadline | None = None) -> bool | None:
        """Let go of the shared hold and wait to hold the lock exclusively (every other verify's files gone):
        whether another verify held it meanwhile (True: the room is worth measuring again), None where the deadline
        came first (the lock is then not held at all)."""
        if self.rw < 0 or self.exclusive:
            return False
        fcntl.flock(self.rw, fcntl.LOCK_UN)
        waited = self.waited_s
        if not self._wait(self.gate, fcntl.LOCK_EX, deadline):  # new verifies wait behind this one
            return None
        try:
            self.exclusive = self._wait(self.rw, fcntl.LOCK_EX, deadline)
        finally:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        return (self.waited_s - waited > _POLL_S / 2) if self.exclusive else None

    def _wait(self, fd: int, mode: int, deadline: Deadline | None) -> bool:
        started = time.monotonic()
        try:
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    if deadline is not None and deadline.expired(margin_s=1.0):
                        return False
                    time.sleep(_POLL_S)
        finally:
            self.waited_s += time.monotonic() - started

    def close(self) -> None:
        for fd in (self.rw, self.gate):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)  # the kernel drops the descriptor's flock
        self.rw = self.gate = -1
        self.exclusive = False
