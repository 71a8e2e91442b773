"""The sets the verdict is assembled from — which finding codes make a verdict ``rejected``, which undermine a
pass, which one a one-line verdict names first — derived from the one catalogue of codes (verify/codes.py, where
each code is defined with its class and meaning), and the :class:`Judge` that collects findings while a verdict
is assembled.
"""

from __future__ import annotations

from typing import Any

from kernelwright.records import Finding, Severity
from kernelwright.verify import trials
from kernelwright.verify.codes import CATALOGUE
from kernelwright.verify.records import TrialOutcome

# Finding codes that make a verdict `rejected` (integrity), as opposed to `incorrect`.
INTEGRITY_CODES = frozenset(c.code for c in CATALOGUE if c.rejects)

# Warnings that undermine a pass (a performance warning does not).
UNCLEAN_CODES = frozenset(c.code for c in CATALOGUE if c.unclean)

# Which finding a one-line verdict names first when there are several: the most specific cause of the rest.
HEADLINE_ORDER = tuple(c.code for c in sorted((c for c in CATALOGUE if c.headline), key=lambda c: c.headline or 0))


def headline_rank(finding: Finding) -> int:
    try:
        return HEADLINE_ORDER.index(finding.code)
    except ValueError:
        return len(HEADLINE_ORDER)


# What a failure on a special trial means, when the ordinary random trials pass.
SPECIAL_TRIAL_CODES = {
    trials.REWRITE: ("output-caching", "wrong after new values were written into trial {source}'s input buffers "
                                       "in place: results are cached by address or shape"),
    trials.SPARSE_IN_PLACE: ("output-caching", "wrong after a few elements of trial {source}'s inputs were changed "
                                               "in its own buffers ({note}): the answer is stale for inputs that "
                                               "differ from an earlier trial's in only a few elements, cached by a "
                                               "few probed elements or by the data pointer"),
    trials.SPARSE_COPY: ("output-caching", "wrong on a fresh copy of trial {source}'s inputs with a few elements "
                                           "changed ({note}): the answer is stale for inputs that differ from an "
                                           "earlier trial's in only a few elements, cached by a few probed elements"),
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
