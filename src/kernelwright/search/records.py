"""The search's records: candidates, what is known of them, the evaluator's interface and the two loops' results.

The template search (:mod:`~kernelwright.search.optimize`), the LLM search (:mod:`~kernelwright.search.llm_search`),
the evaluators (:mod:`~kernelwright.search.evaluate`) and the outputs writer (:mod:`~kernelwright.search.outputs`)
all speak these; none of them imports another for its types.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.generate.families.base import DEFAULT_POLICY, Policy
from kernelwright.generate.plan import Plan
from kernelwright.search.strategies import Entry
from kernelwright.verify.records import Verdict


@dataclass(frozen=True, kw_only=True)
class Candidate:
    index: int
    label: str  # "default", or which group's configuration changed
    choice: tuple[int, ...]  # per group: the index of its configuration in the family's space
    configs: tuple[Mapping[str, Any], ...]
    path: Path
    sha256: str
    ptx_passes: tuple[str, ...] = ()  # the PTX rewrites its file applies (generate/ptx_variant.py); () for none


@dataclass(frozen=True, kw_only=True)
class RewriteTrial:
    """One PTX rewrite of the tuned leader, timed beside it in the same batch (search/rewrites.py)."""

    passes: tuple[str, ...]
    candidate: int  # the rewritten candidate's index
    base: int  # the plain candidate's index
    base_ms: float | None  # the plain candidate, timed in the same batch
    median_ms: float | None  # None: not timed (an error, or the budget ran out)
    kept: bool  # timed under the plain one by the stage's margin: a finalist
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        """The plain kernel's time over the rewrite's (above 1: the rewrite is faster)."""
        return self.base_ms / self.median_ms if self.base_ms and self.median_ms else None


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What is known about one candidate so far."""

    candidate: Candidate
    status: str  # "built", "timed", "wrong", "failed", or the verdict's status once verified
    median_ms: float | None = None
    error: str | None = None
    verdict: Verdict | None = None


class Evaluator(Protocol):
    timed: bool  # whether this evaluator measures time (a GPU)
    # Optional: seconds to keep for one verify when splitting a budget (GpuEvaluator.verify_estimate_s); 0 if absent.

    def time(self, candidates: Sequence[Candidate], *, deadline: Deadline = NO_DEADLINE) -> Iterator[Outcome]:
        """Quick correctness check and timing of each candidate, yielded as each finishes; candidates not reached
        by ``deadline`` are left out."""

    def verify(self, candidate: Candidate, *, compile_baseline: bool, deadline: Deadline = NO_DEADLINE) -> Verdict:
        """The verifier's full protocol, ended by ``deadline``: a verify the budget cuts short is a ``timeout``
        verdict that says so."""


@dataclass(frozen=True, kw_only=True)
class OptimizeResult:
    problem: Path
    out_dir: Path
    plan: Plan
    outcomes: tuple[Outcome, ...]
    best: Outcome | None
    timed: bool
    interrupted: bool
    elapsed_s: float
    arch: str
    device: str
    policy: Policy = DEFAULT_POLICY
    rewrites: tuple[RewriteTrial, ...] = ()  # the PTX rewrite stage's trials (on a GPU, Triton leaders)


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    run_id: int
    problem: Path
    out_dir: Path
    strategy: str
    entries: tuple[Entry, ...]
    best: Entry | None
    stop_reason: str
    interrupted: bool
    elapsed_s: float
    usage: Mapping[str, Any]
    scaling: Mapping[str, Any]
    device: str
    arch: str
    timed: bool
    policy: Policy = DEFAULT_POLICY
