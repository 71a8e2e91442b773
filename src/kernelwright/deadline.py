"""One record for a budget's end, carried unchanged from the command line to the process that runs a child job.

    deadline = Deadline.after(args.budget)         # the command's --budget (None: no end)
    tuning = deadline.share(0.75)                  # the search's part of what is left
    run_child(..., timeout_s=600, deadline=deadline)   # the child's limit: deadline.cap(600)

``at`` is a ``time.monotonic()`` instant. On Linux that clock is CLOCK_MONOTONIC, one clock for every process of the
machine, so a deadline written into a child's spec means the same instant there. A deadline without ``at`` never
ends: every method then leaves its argument as it is, so callers need no ``if deadline is not None``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Deadline:
    at: float | None = None  # time.monotonic() by which the work must end; None: no deadline

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """The deadline ``seconds`` from now (None: none)."""
        return cls(None if seconds is None else time.monotonic() + seconds)

    @classmethod
    def of(cls, value: Deadline | float | None) -> Deadline:
        """``value`` as a deadline: a deadline as it is, an instant (``time.monotonic()``), or None (none)."""
        if isinstance(value, Deadline):
            return value
        if value is None:
            return NO_DEADLINE
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise TypeError(f"a deadline is a Deadline, a time.monotonic() instant or None, not {value!r}")
        return cls(float(value))

    @property
    def bounded(self) -> bool:
        return self.at is not None

    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed; infinite without one)."""
        return math.inf if self.at is None else max(0.0, self.at - time.monotonic())

    def expired(self, margin_s: float = 0.0) -> bool:
        """Whether less than ``margin_s`` is left."""
        return self.at is not None and self.at - time.monotonic() <= margin_s

    def cap(self, timeout_s: float, *, at_least_s: float = 0.0) -> float:
        """``timeout_s`` cut to the time left (but not below ``at_least_s``)."""
        return min(timeout_s, max(at_least_s, self.left()))

    def limits(self, timeout_s: float) -> bool:
        """Whether the deadline, not ``timeout_s``, is the nearer end (a job killed then was cut by the budget)."""
        return self.left() < timeout_s

    def share(self, fraction: float) -> Deadline:
        """The deadline ``fraction`` of the time left from now (the first part of a budget split in turns)."""
        if self.at is None:
            return self
        now = time.monotonic()
        return Deadline(now + fraction * max(0.0, self.at - now))

    def extended(self, seconds: float) -> Deadline:
        """``seconds`` later (an allowance past the budget, such as a bench's --verify-limit for the last verify)."""
        return self if self.at is None else Deadline(self.at + seconds)

    def not_before(self, at: float) -> Deadline:
        """This deadline, but no earlier than the instant ``at``."""
        return self if self.at is None else Deadline(max(self.at, at))

    def earliest(self, other: Deadline) -> Deadline:
        """The nearer of two deadlines."""
        if self.at is None or (other.at is not None and other.at < self.at):
            return other
        return self

    def __str__(self) -> str:
        return "no deadline" if self.at is None else f"{self.left():.1f}s left"


NO_DEADLINE = Deadline()
