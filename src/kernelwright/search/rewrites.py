"""The template search's PTX rewrite stage (issue 30 item 2): once tuning has a leader, its Triton kernels are
rewritten by each named pass set (inspect/ptx_rewrite.py, applied through generate/ptx_variant.py), and the rewrites
are timed in one batch beside the plain leader. A rewrite becomes a finalist only where it times at least
``WIN_MARGIN`` under the plain kernel of the same batch; then the verifier judges it like any other candidate
(compute-sanitizer on by default: its code sits below Triton's). Every trial, kept or not, is in the report.

Not tried: CUDA C++ leaders (their PTX is nvcc's, inline PTX already says what it means), leaders whose file already
rewrites, a Triton without the compile-pipeline hook, ``KERNELWRIGHT_PTX_REWRITES=0``.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from dataclasses import replace
from typing import Any

from kernelwright.deadline import Deadline
from kernelwright.search.candidates import CandidateBuilder
from kernelwright.search.progress import Progress
from kernelwright.search.records import Evaluator, Outcome, RewriteTrial

log = logging.getLogger(__name__)

# The pass sets tried, in order: loads read once (most memory-bound kernels), stores written once, both, and operand
# tiles read again (GEMM-like loops).
PASS_SETS: tuple[tuple[str, ...], ...] = (
    ("no-allocate-loads",),
    ("evict-first-loads",),
    ("streaming-stores",),
    ("no-allocate-loads", "streaming-stores"),
    ("evict-last-loads",),
)
WIN_MARGIN = 0.01  # kept only where it times at least 1% under the plain kernel of the same batch
TUNING_SHARE = 0.85  # with the stage on, the coordinate descent gets this share of the tuning time


def available(evaluator: Evaluator) -> bool:
    """Whether the stage runs: on a timing evaluator, with the setting on and a Triton that has the hook."""
    from kernelwright.config import config

    if not evaluator.timed or not config.ptx_rewrites:
        return False
    try:
        from triton import knobs
    except ImportError:
        return False
    return hasattr(getattr(knobs, "runtime", None), "add_stages_inspection_hook")


def rewrite_stage(builder: CandidateBuilder, evaluator: Evaluator, deadline: Deadline, leader: Outcome,
                  outcomes: MutableMapping[int, Outcome], record: Any, progress: Progress) -> tuple[RewriteTrial, ...]:
    """Time ``leader``'s PTX rewrites beside it until ``deadline``; ``outcomes`` gets each rewrite's outcome and the
    leader's time from this batch (the paired figure). Returns the trials, kept or not."""
    from kernelwright.generate.ptx_variant import MARK, with_ptx_rewrite

    base = leader.candidate
    if any(c.get("backend", "triton") != "triton" for c in base.configs) or base.ptx_passes:
        return ()
    source = base.path.read_text()
    if MARK in source or "@triton.jit" not in source:
        return ()
    variants = [builder.derive(base, with_ptx_rewrite(source, passes), f"ptx {'+'.join(passes)}", ptx_passes=passes)
                for passes in PASS_SETS]
    progress.built = builder.count
    timed: dict[int, Outcome] = {}
    for outcome in evaluator.time([base, *variants], deadline=deadline):
        timed[outcome.candidate.index] = outcome
        progress.timed += 1
        progress.show()
    again = timed.get(base.index)
    base_ms = again.median_ms if again is not None and again.median_ms is not None else leader.median_ms
    if again is not None and again.median_ms is not None:
        outcomes[base.index] = replace(outcomes.get(base.index, leader), median_ms=again.median_ms)
    trials = []
    for variant, passes in zip(variants, PASS_SETS):
        outcome = timed.get(variant.index)
        median = outcome.median_ms if outcome is not None else None
        kept = median is not None and base_ms is not None and median < base_ms * (1 - WIN_MARGIN)
        trials.append(RewriteTrial(passes=passes, candidate=variant.index, base=base.index, base_ms=base_ms,
                                   median_ms=median, kept=kept,
                                   error=(outcome.error if outcome is not None else "not timed: the budget ran out")))
        if outcome is not None:
            outcomes[variant.index] = outcome
            record.outcome(outcome)
    for t in trials:
        log.info("ptx %s: %s ms against %s ms plain%s", "+".join(t.passes), t.median_ms, t.base_ms,
                 " (kept)" if t.kept else "")
    return tuple(trials)
