"""Search strategies for the LLM generator (issue 6), over one interface.

A strategy decides *what to ask for next*; the loop (:mod:`kernelwright.search.llm_search`) decides *when* (as many
requests in flight as ``samples`` allows, within the budgets), turns each :class:`Request` into a prompt, verifies
what comes back, and reports every finished :class:`Entry` to :meth:`Strategy.observe`.

- ``best-of-n``: independent samples of the first prompt, ``samples`` at a time, until a budget ends.
- ``refine``: ``samples`` lineages in parallel, each a sequence of rounds; every round sees its lineage's best
  kernel and its last attempt with the verifier's feedback.
- ``evolve``: a population of verified kernels; each new request mutates a tournament winner (chosen by verified
  speed), crosses two of them, or — when the template library seeded the run — changes a template parameter.

Strategies are deterministic given their ``random.Random``; they never call the LLM or the verifier themselves.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

STRATEGIES = ("best-of-n", "refine", "evolve")

# Request kinds: what the loop has to build for them.
FRESH, REFINE, MUTATE, CROSSOVER, TEMPLATE = "fresh", "refine", "mutate", "crossover", "template"


@dataclass(frozen=True, kw_only=True)
class Request:
    lineage: int
    round: int
    kind: str
    parents: tuple[Entry, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One finished candidate: generated (or built from a template), parsed, verified — or failed on the way."""

    index: int  # order in which it finished (the x axis of the scaling curve)
    lineage: int
    round: int
    origin: str  # "llm", "mutation", "crossover", "template", "seed"
    source: str | None
    failure: str | None = None  # the response had no usable code, or the LLM call failed
    verdict: Any = None  # kernelwright.verify.records.Verdict
    candidate_id: int | None = None  # the run database's id
    parents: tuple[int, ...] = ()  # candidate ids
    path: str | None = None
    template_choice: tuple[int, ...] | None = None  # for template-built entries

    @property
    def passed(self) -> bool:
        return self.verdict is not None and self.verdict.passed

    @property
    def median_ms(self) -> float | None:
        if not self.passed:
            return None
        return self.verdict.median_ms()

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.verdict.speedups.get("vs_eager") if self.passed else None


def better(a: Entry | None, b: Entry | None) -> Entry | None:
    """The better of two entries: a pass beats a failure; of two passes the faster (untimed passes: the older)."""
    if a is None or b is None:
        return a if b is None else b
    if a.passed != b.passed:
        return a if a.passed else b
    if a.passed and b.median_ms is not None and (a.median_ms is None or b.median_ms < a.median_ms):
        return b
    return a


@dataclass
class Strategy:
    """Base: the entries seen so far, per lineage and overall."""

    samples: int
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    seeds: list[Entry] = field(default_factory=list)  # template-library kernels the run starts from (hybrid)
    entries: list[Entry] = field(default_factory=list)
    in_flight: dict[int, int] = field(default_factory=dict)  # lineage -> requests not yet observed
    rounds: dict[int, int] = field(default_factory=dict)  # lineage -> rounds requested so far
    name: str = ""

    def next_request(self) -> Request | None:
        """The next thing to ask for, or None while nothing more can start (the loop asks again later)."""
        raise NotImplementedError

    def observe(self, entry: Entry) -> None:
        self.entries.append(entry)
        if self.in_flight.get(entry.lineage, 0) > 0:
            self.in_flight[entry.lineage] -= 1
        self.rounds[entry.lineage] = max(self.rounds.get(entry.lineage, 0), entry.round + 1)

    def restore(self, entry: Entry) -> None:
        """Replay a finished entry from the database (``--resume``)."""
        self.observe(entry)

    def restore_pending(self, entry: Entry) -> None:
        """A candidate generated before ``--resume`` but never verified: in flight again until it is observed, so
        its lineage gets no second request meanwhile and the next round's number follows it."""
        self.in_flight[entry.lineage] = self.in_flight.get(entry.lineage, 0) + 1
        self.rounds[entry.lineage] = max(self.rounds.get(entry.lineage, 0), entry.round + 1)

    # -- helpers ------------------------------------------------------------------------------------------------
    def _issue(self, lineage: int, kind: str, parents: tuple[Entry, ...] = ()) -> Request:
        round_ = self.rounds.get(lineage, 0)
        self.rounds[lineage] = round_ + 1
        self.in_flight[lineage] = self.in_flight.get(lineage, 0) + 1
        return Request(lineage=lineage, round=round_, kind=kind, parents=parents)

    def best(self, lineage: int | None = None) -> Entry | None:
        found: Entry | None = None
        for e in [*self.seeds, *self.entries]:
            if lineage is None or e.lineage == lineage or e.origin == "seed":
                found = better(found, e)
        return found if found is not None and found.passed else None

    def last(self, lineage: int) -> Entry | None:
        mine = [e for e in self.entries if e.lineage == lineage]
        return mine[-1] if mine else None

    def busy(self) -> int:
        return sum(self.in_flight.values())

    def new_lineage(self) -> int:
        """A lineage number not used yet — also after ``--resume``, which replays only the verified candidates."""
        return max([*self.rounds, *self.in_flight, *(e.lineage for e in self.entries)], default=-1) + 1


@dataclass
class BestOfN(Strategy):
    name: str = "best-of-n"

    def next_request(self) -> Request | None:
        if self.busy() >= self.samples:
            return None
        return self._issue(self.new_lineage(), FRESH)  # every sample its own lineage: they never see each other


@dataclass
class Refine(Strategy):
    name: str = "refine"

    def next_request(self) -> Request | None:
        for lineage in range(self.samples):
            if self.in_flight.get(lineage, 0) == 0:
                last = self.last(lineage)
                return self._issue(lineage, FRESH if last is None else REFINE, () if last is None else (last,))
        return None


@dataclass
class Evolve(Strategy):
    """Population-based: tournament selection by verified speed; LLM mutation and crossover; template mutation."""

    name: str = "evolve"
    tournament: int = 3
    p_crossover: float = 0.3
    p_template: float = 0.2

    def population(self) -> list[Entry]:
        """The verified kernels, each source once: a model answering with its parent unchanged adds no copy (a copy
        would win more tournaments, and crossover would pair a kernel with itself)."""
        population: dict[str | None, Entry] = {}
        for e in [*self.seeds, *self.entries]:
            if e.passed:
                population.setdefault(e.source, e)
        return list(population.values())

    def select(self, exclude: Entry | None = None) -> Entry:
        pool = [e for e in self.population() if exclude is None or e.source != exclude.source] or self.population()
        contenders = self.rng.sample(pool, min(self.tournament, len(pool)))
        timed = [e for e in contenders if e.median_ms is not None]
        if timed:
            return min(timed, key=lambda e: e.median_ms or 0.0)
        return contenders[0]  # nothing timed (no GPU): a random pass

    def next_request(self) -> Request | None:
        if self.busy() >= self.samples:
            return None
        lineage = self.new_lineage()
        population = self.population()
        if not population:
            # Nothing verified yet: fresh samples, each told what the last failure was.
            recent = self.entries[-1:] if self.entries else []
            return self._issue(lineage, FRESH if not recent else REFINE, tuple(recent))
        r = self.rng.random()
        templated = [e for e in population if e.template_choice is not None]
        if templated and r < self.p_template:
            return self._issue(lineage, TEMPLATE, (self.select_from(templated),))
        if len(population) >= 2 and r < (self.p_template if templated else 0.0) + self.p_crossover:
            a = self.select()
            return self._issue(lineage, CROSSOVER, (a, self.select(exclude=a)))
        return self._issue(lineage, MUTATE, (self.select(),))

    def select_from(self, pool: list[Entry]) -> Entry:
        timed = [e for e in pool if e.median_ms is not None]
        return min(timed, key=lambda e: e.median_ms or 0.0) if timed else self.rng.choice(pool)


def make_strategy(name: str, samples: int, *, seed: int = 0, seeds: list[Entry] | None = None) -> Strategy:
    classes = {"best-of-n": BestOfN, "refine": Refine, "evolve": Evolve}
    if name not in classes:
        raise ValueError(f"unknown strategy {name!r}: choose one of {', '.join(STRATEGIES)}")
    if samples < 1:
        raise ValueError(f"--samples must be at least 1 (got {samples})")
    return classes[name](samples=samples, rng=random.Random(seed), seeds=list(seeds or []))
