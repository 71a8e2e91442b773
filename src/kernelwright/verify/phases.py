"""Where a verify spends its time: the wall time of each step of the protocol, for the verdict, and a progress file
each step appends a JSON line to as it starts and ends (``{"phase", "event", "at_s", "s", "lock_wait_s"}``; event
"start", "end", or "stopped" where an exception or a signal left the step), so that a verify a caller's limit
kills still says where it was."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class PhaseClock:
    def __init__(self, progress_file: str | None = None, candidate: str = "") -> None:
        self.phases: dict[str, float] = {}  # step -> seconds (a step entered twice adds up)
        self.progress_file = progress_file
        self.started = time.monotonic()
        # Where one verify's lines begin: a file several verifies append to (a search's finalists) stays readable.
        self._write("verify", "start", candidate=candidate)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        self._write(name, "start")
        ended = "stopped"  # an exception or a signal (Ctrl-C, a call's limit) left the step
        try:
            yield
            ended = "end"
        finally:
            took = time.monotonic() - started
            self.phases[name] = round(self.phases.get(name, 0.0) + took, 2)
            self._write(name, ended, s=round(took, 2))

    def _write(self, phase: str, event: str, **extra: Any) -> None:
        if not self.progress_file:
            return
        line = {"phase": phase, "event": event, "at_s": round(time.monotonic() - self.started, 2), **extra,
                "lock_wait_s": self.phases.get("gpu_lock_wait", 0.0)}
        try:
            Path(self.progress_file).parent.mkdir(parents=True, exist_ok=True)
            with open(self.progress_file, "a") as f:
                f.write(json.dumps(line) + "\n")
        except OSError as exc:  # a diagnostic: never the verdict's problem
            log.info("progress file %s: %s", self.progress_file, exc)


class BudgetSpent(Exception):
    """The deadline came before (or during) a job whose result the verdict cannot do without."""

    def __init__(self, job: str) -> None:
        super().__init__(job)
        self.job = job
