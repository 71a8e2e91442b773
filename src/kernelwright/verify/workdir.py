"""The working directory a process prepares for its next verify, its children already started in it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from kernelwright.isolation.process import discard_prestarted, prestart_child


class WarmWorkdir:
    """One working directory prepared for the next verify of this process, its candidate (and on a GPU its
    baseline) child already started in it: each still serves one job of one verify (isolation/process.py). One at
    a time, so a long-lived process (a bench worker, a test session) keeps at most that many idle children."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._ready: tuple[str, Path] | None = None  # (the scratch folder it is in, the workdir)

    @staticmethod
    def _where(scratch: str | None) -> str:
        return str(Path(scratch or tempfile.gettempdir()).resolve())

    def take(self, scratch: str | None) -> Path | None:
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is None:
            return None
        if ready[0] == self._where(scratch) and ready[1].is_dir():
            return ready[1]
        self._drop(ready[1])
        return None

    def prepare(self, scratch: str | None, device: str, *, timing: bool) -> None:
        workdir = Path(tempfile.mkdtemp(prefix="kernelwright-verify-", dir=scratch))
        with self._lock:
            old, self._ready = self._ready, (self._where(scratch), workdir)
        if old is not None:
            self._drop(old[1])
        prestart_child("candidate", workdir=workdir, device=device)
        if device == "cuda" and timing:
            prestart_child("baseline", workdir=workdir, device=device)

    @staticmethod
    def _drop(workdir: Path) -> None:
        discard_prestarted(workdir)
        shutil.rmtree(workdir, ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is not None:
            self._drop(ready[1])
