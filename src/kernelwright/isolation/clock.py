"""The clock a job's time limit runs on — real time for users, a clock the test holds for tests.

``run_child`` asks the clock in force whether a job's limit has run out while it waits for the job to end:

    timed_out = current().wait(proc, job="candidate", limit_s=60, messages=messages)

:class:`WallClock` (the default) is ``proc.wait(timeout=limit_s)``. A test that needs a job to run out of time
(a hang, a candidate slow on its last trial) must not depend on how fast a shared machine is: a limit of 15 s for
work that takes 3 s alone times out honest work on a loaded machine, and one of 300 s makes the test wait 300 s.
:class:`HeldClock` stands still for every job — no honest work runs out of time however slow the machine — and runs
out only where the test says, on what the job itself reported (``trial_start`` of trial 0, say):

    with clock.holding(clock.HeldClock(clock.at_message("candidate", "trial_start", index=0))):
        verdict = verify(problem, hanging_candidate, options)   # a timeout in trial 0, on any machine

The real clock is tested on its own (a child that sleeps past a short limit); everything after the kill — the
group ended, the verdict's wording, the next job — is the same code on either clock.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

# A rule of a held clock: (the job's name, the messages it has sent so far) -> whether its time has run out.
Rule = Callable[[str, Sequence[Mapping[str, Any]]], bool]


class Waitable(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...


class JobClock(Protocol):
    def wait(self, proc: Waitable, *, job: str, limit_s: float, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Wait until ``proc`` ends (False) or its limit has run out (True: the caller ends it)."""


class WallClock:
    """Real time: the job runs out ``limit_s`` seconds after it was handed over."""

    def wait(self, proc: Waitable, *, job: str, limit_s: float, messages: Sequence[Mapping[str, Any]]) -> bool:
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            return True
        return False


class HeldClock:
    """A clock that stands still: a job runs out of time only when one of ``rules`` says so, checked every
    ``poll_s`` against the messages the job has sent. ``give_up_s`` of real time ends a job all the same (a test
    whose rule never fires fails on its assertion instead of hanging CI)."""

    def __init__(self, *rules: Rule, poll_s: float = 0.02, give_up_s: float = 600.0) -> None:
        self.rules = rules
        self.poll_s = poll_s
        self.give_up_s = give_up_s
        self.ran_out: list[str] = []  # the jobs this clock ended, in order

    def wait(self, proc: Waitable, *, job: str, limit_s: float, messages: Sequence[Mapping[str, Any]]) -> bool:
        started = time.monotonic()
        while True:
            try:
                proc.wait(timeout=self.poll_s)
                return False
            except subprocess.TimeoutExpired:
                pass
            seen = list(messages)  # the reader thread appends while we look
            if any(rule(job, seen) for rule in self.rules) or time.monotonic() - started > self.give_up_s:
                self.ran_out.append(job)
                return True


def at_message(job: str, event: str, **fields: Any) -> Rule:
    """A rule: ``job`` runs out of time once it has sent an ``event`` message whose fields include ``fields``."""

    def rule(name: str, messages: Sequence[Mapping[str, Any]]) -> bool:
        return name == job and any(m.get("event") == event and all(m.get(k) == v for k, v in fields.items())
                                   for m in messages)

    return rule


_CURRENT: JobClock = WallClock()


def current() -> JobClock:
    return _CURRENT


@contextlib.contextmanager
def holding(clock: JobClock) -> Iterator[JobClock]:
    """Run the jobs started inside the block on ``clock`` (this process's jobs; a test's own)."""
    global _CURRENT
    before, _CURRENT = _CURRENT, clock
    try:
        yield clock
    finally:
        _CURRENT = before
