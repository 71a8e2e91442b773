"""The search's live status line on stderr: rewritten in place on a terminal, one line each time elsewhere.

Both loops show one; they differ only in what they count::

    built 6 | timed 4 | verified 1 | best 0.0531 ms (2.29x eager) (verifying c000)          template search
    asked 8 | verified 7 | correct 3 | best 0.0702 ms (2.04x eager) | 51234 tokens          LLM search
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any


def status_line(stream: Any, line: str) -> None:
    """A live status line: rewritten in place on a terminal, one line each time elsewhere (logs, CI)."""
    if getattr(stream, "isatty", lambda: False)():
        stream.write("\r\033[K" + line[:160])
    else:
        stream.write(line + "\n")
    stream.flush()


@dataclass
class Progress:
    """Counters of one search and the best so far. ``llm`` selects the LLM loop's counters (asked / verified /
    correct / tokens) instead of the template search's (built / timed / verified)."""

    stream: Any = None
    llm: bool = False
    built: int = 0
    timed: int = 0
    asked: int = 0
    verified: int = 0
    correct: int = 0
    tokens: int = 0
    best_ms: float | None = None
    baseline_ms: float | None = None  # eager's median: the speedup is baseline_ms / best_ms
    best_speedup: float | None = None  # or the speedup itself, where the best entry carries one
    note: str = ""
    _last: float = field(default=0.0, repr=False)

    def line(self) -> str:
        if self.best_ms:
            best = f"best {self.best_ms:.4f} ms"
        else:
            best = "best: correct" if self.llm and self.correct else "best -"
        speedup = self.best_speedup or (self.baseline_ms / self.best_ms if self.best_ms and self.baseline_ms
                                        else None)
        if speedup:
            best += f" ({speedup:.2f}x eager)"
        if self.llm:
            return (f"asked {self.asked} | verified {self.verified} | correct {self.correct} | {best} | "
                    f"{self.tokens} tokens {self.note}")
        return f"built {self.built} | timed {self.timed} | verified {self.verified} | {best} {self.note}"

    def show(self, force: bool = False) -> None:
        stream = self.stream or sys.stderr
        now = time.monotonic()
        if not force and now - self._last < (0.5 if self.llm else 0.2):
            return
        self._last = now
        status_line(stream, self.line())

    def done(self) -> None:
        stream = self.stream or sys.stderr
        self.show(force=True)
        if getattr(stream, "isatty", lambda: False)():
            stream.write("\n")
