"""The LLM search strategies on their own: lineage numbering and in-flight accounting (also after ``--resume``), and
the evolutionary population."""

from __future__ import annotations

import random

from kernelwright.records import Status
from kernelwright.search.strategies import CROSSOVER, MUTATE, Entry, Evolve, make_strategy


class _Passed:
    status, passed, speedups = Status.PASSED, True, {"vs_eager": 1.0}

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def median_ms(self, name: str = "candidate") -> float | None:  # Verdict's accessor
        return self.ms if name == "candidate" else None


def _entry(index: int, lineage: int, round_: int = 0, *, ms: float | None = None, source: str | None = None) -> Entry:
    return Entry(index=index, lineage=lineage, round=round_, origin="llm", source=source or f"k{index}",
                 verdict=_Passed(ms) if ms is not None else None, failure=None if ms is not None else "no code")


def test_new_lineages_never_reuse_a_restored_or_pending_one() -> None:
    # A resumed run replays only its verified candidates: lineages 0, 4 and 7 (the calls between them failed).
    strategy = make_strategy("best-of-n", 2)
    for i, lineage in enumerate((0, 4)):
        strategy.restore(_entry(i + 1, lineage, ms=1.0))
    strategy.restore_pending(_entry(-1, 7))
    assert strategy.busy() == 1  # the pending verification takes one of the two slots
    request = strategy.next_request()
    assert request is not None and request.lineage == 8
    assert strategy.next_request() is None


def test_a_pending_candidate_keeps_its_refine_lineage_busy_and_the_next_round_follows_it() -> None:
    strategy = make_strategy("refine", 1)
    strategy.restore(_entry(1, 0, 0, ms=2.0))
    pending = _entry(-1, 0, 1)
    strategy.restore_pending(pending)
    assert strategy.next_request() is None  # no second request on lineage 0 while round 1 is being verified
    strategy.observe(_entry(2, 0, 1, ms=1.0))
    request = strategy.next_request()
    assert request is not None and (request.lineage, request.round) == (0, 2)


def test_evolve_counts_each_source_once_and_never_crosses_a_kernel_with_itself() -> None:
    strategy = Evolve(samples=1, rng=random.Random(0))
    same = "the same kernel"
    for i in range(5):
        strategy.observe(_entry(i + 1, i, ms=1.0, source=same))
    strategy.observe(_entry(6, 5, ms=2.0, source="another kernel"))
    assert [e.source for e in strategy.population()] == [same, "another kernel"]
    for _ in range(50):
        request = strategy.next_request()
        assert request is not None
        if request.kind == CROSSOVER:
            a, b = request.parents
            assert a.source != b.source
        strategy.in_flight.clear()


def test_evolve_crosses_over_at_its_crossover_rate_when_no_template_seeded_it() -> None:
    strategy = Evolve(samples=1, rng=random.Random(1))
    strategy.observe(_entry(1, 0, ms=1.0))
    strategy.observe(_entry(2, 1, ms=2.0))
    kinds = []
    for _ in range(2000):
        request = strategy.next_request()
        assert request is not None and request.kind in (MUTATE, CROSSOVER)
        kinds.append(request.kind)
        strategy.in_flight.clear()
    assert abs(kinds.count(CROSSOVER) / len(kinds) - strategy.p_crossover) < 0.04
