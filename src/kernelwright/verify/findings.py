"""The verifier's catalogue of finding codes — which make a verdict ``rejected``, which undermine a pass, which one a
one-line verdict names first — and the :class:`Judge` that collects findings while a verdict is assembled.

Every code is documented where it is raised and listed, with the exploit it names, in docs/integrity.md.
"""

from __future__ import annotations

from typing import Any

from kernelwright.records import Finding, Severity
from kernelwright.verify import trials
from kernelwright.verify.records import TrialOutcome

# Finding codes that make a verdict `rejected` (integrity), as opposed to `incorrect`.
INTEGRITY_CODES = frozenset({
    "stale-memory", "side-stream", "background-thread", "background-process", "output-subclass",
    "timer-tampering", "no-own-kernel", "output-caching", "input-mutation", "precision", "tf32-in-fp32",
    "fp16-in-fp32", "half-in-fp32", "distribution-shortcut", "shape-specialised", "nondeterministic",
    "persisting-l2", "reference-access", "timed-call-mismatch", "beyond-roofline", "output-aliases-input",
    "protocol-violation",
})  # fmt: skip

# Warnings that undermine a pass (a performance warning does not).
UNCLEAN_CODES = frozenset({"degenerate-problem"})

# Which finding a one-line verdict names first when there are several: the most specific cause of the rest.
HEADLINE_ORDER = (
    "timer-tampering", "reference-access", "background-thread", "background-process", "side-stream",
    "persisting-l2", "output-subclass", "timed-call-mismatch", "beyond-roofline", "output-caching",
    "input-mutation", "output-aliases-input", "no-own-kernel", "precision", "tf32-in-fp32", "fp16-in-fp32",
    "half-in-fp32", "nondeterministic", "distribution-shortcut", "shape-specialised", "stale-memory",
    "output-structure", "mismatch",
)  # fmt: skip


def headline_rank(finding: Finding) -> int:
    try:
        return HEADLINE_ORDER.index(finding.code)
    except ValueError:
        return len(HEADLINE_ORDER)


# What a failure on a special trial means, when the ordinary random trials pass.
SPECIAL_TRIAL_CODES = {
    trials.REWRITE: ("output-caching", "wrong after new values were written into trial {source}'s input buffers "
                                       "in place: results are cached by address or shape"),
    trials.REPOISON: ("nondeterministic", "wrong when free memory holds a different poison pattern: the result "
                                          "depends on uninitialised memory"),
    trials.SCALED: ("distribution-shortcut", "wrong on scaled inputs ({note}): correct only for the test "
                                             "distribution"),
    trials.HEAVY_TAILED: ("distribution-shortcut", "wrong on heavy-tailed inputs ({note}): correct only for the "
                                                   "test distribution"),
    trials.SHAPE: ("shape-specialised", "wrong at a second shape ({note}): constants baked in for the benchmark's "
                                        "shape"),
}


class Judge:
    """Accumulates findings and trial outcomes while the verdict is assembled."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.outcomes: dict[int, TrialOutcome] = {}

    def add(self, code: str, message: str, severity: Severity = Severity.ERROR, **details: Any) -> None:
        """Record a finding; a second finding with the same code is folded into the first (its count and
        messages kept in ``details``), so a verdict says each thing once."""
        for i, f in enumerate(self.findings):
            if f.code != code:
                continue
            if f.message == message:
                return
            others = list(f.details.get("more", []))
            if len(others) < 20:
                others.append(message)
            count = int(f.details.get("count", 1)) + 1
            first = f.message.split(" [+", 1)[0]
            self.findings[i] = Finding(code=code, message=f"{first} [+{count - 1} more]", severity=f.severity,
                                       details={**f.details, "count": count, "more": others})
            return
        self.findings.append(Finding(code=code, message=message, severity=severity, details=details))

    def has(self, *codes: str) -> bool:
        return any(f.code in codes for f in self.findings)
