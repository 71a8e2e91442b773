"""The template library inside the LLM loop (``--generator hybrid`` and the ``evolve`` strategy's template
mutations): the template search's best verified kernel as the seed, the builder that writes the mutations, and which
configuration a mutation tries next — drawn at random, or the cost model's most promising untried one
(costmodel/ranker.py) with an explorer drawn at random a quarter of the time."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

from kernelwright.deadline import Deadline
from kernelwright.errors import InputError
from kernelwright.generate.families.base import Policy
from kernelwright.search.progress import Progress
from kernelwright.search.records import Candidate
from kernelwright.search.strategies import Entry, Strategy

log = logging.getLogger(__name__)

TEMPLATE_EXPLORE = 0.25  # with a cost model, this share of template mutations still draws the configuration


def next_mutation(builder: Any, parent: tuple[int, ...], rng: random.Random, ranker: Any = None
                  ) -> tuple[int, ...] | None:
    """The template choice a mutation of ``parent`` builds: one group's configuration changed to one not built
    yet. The group is drawn at random; its new configuration too without a cost model (``ranker``), else the
    model's first pick unless this draw is an explorer. None when every neighbour was built."""

    def at(g: int, i: int) -> tuple[int, ...]:
        choice = list(parent)
        choice[g] = i
        return tuple(choice)

    options = [(g, i) for g, space in enumerate(builder.spaces) for i in range(len(space)) if i != parent[g]]
    rng.shuffle(options)
    options = [(g, i) for g, i in options if at(g, i) not in builder.by_choice]
    if not options:
        return None
    g, i = options[0]
    if ranker is not None and rng.random() >= TEMPLATE_EXPLORE:
        mine = sorted(j for h, j in options if h == g)
        order = ranker.best_first([builder.source(at(g, j)) for j in mine], builder.plan.groups[g].family)
        if order:
            i = mine[order[0]]
    return at(g, i)


def seed_from_templates(problem: Path, out: Path, deadline: Deadline, device: str, arch: str, policy: Policy,
                         evaluator: Any, db: Any, run_id: int, strategy: Strategy) -> Any:
    """Hybrid runs: the template library's search first; its best verified kernel seeds every prompt and the
    evolutionary population. Returns the template builder (for template mutations), or None when no template
    covers the problem (the LLM then starts from scratch)."""
    from kernelwright.search.optimize import optimize
    from kernelwright.verify.records import verdict_json

    try:
        result = optimize(problem, out_dir=out / "templates", deadline=deadline, device=device, arch=arch,
                          policy=policy, evaluator=evaluator, progress=Progress())
    except InputError as exc:
        log.warning("hybrid: %s — the LLM starts without a seed", exc)
        return None
    if result.interrupted:  # optimize() kept Ctrl-C to write its outputs; the run ends here all the same
        raise KeyboardInterrupt
    best = result.best
    if best is not None and best.verdict is not None and best.verdict.passed:
        source = best.candidate.path.read_text()
        choice = best.candidate.choice
        cid, _ = db.add_candidate(run_id, source, origin="seed", lineage=-1, round=0, meta=choice_meta(choice))
        # A copy of its own: the template search's candidate files are not the run's to keep.
        path = out / "candidates" / f"k{cid:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        db.record_verdict(cid, json.loads(verdict_json(best.verdict)), arch=arch, toolchain="templates",
                          options_key="seed")
        strategy.seeds.append(Entry(index=0, lineage=-1, round=0, origin="seed", source=source,
                                    verdict=best.verdict, candidate_id=cid, path=str(path), template_choice=choice))
    return mutation_builder(problem, out, arch, policy, [o.candidate for o in result.outcomes])


def mutation_builder(problem: Path, out: Path, arch: str, policy: Policy, tried: list[Candidate]) -> Any:
    """The template builder for template mutations (hybrid): its files go to ``templates/mutations`` (a builder
    numbers its files from c000, so in the template search's folder it would overwrite that search's kernels), and
    the configurations ``tried`` already are not built again. None when no template covers the problem."""
    from kernelwright.search.candidates import template_builder

    try:
        _, builder = template_builder(problem, out / "templates" / "mutations", arch=arch, policy=policy)
    except InputError as exc:
        log.warning("hybrid: %s — no template mutations", exc)
        return None
    for candidate in tried:
        builder.by_choice.setdefault(candidate.choice, candidate)
    return builder


def choice_meta(choice: tuple[int, ...] | None) -> dict[str, Any] | None:
    """What the run database keeps of a template-built candidate, so ``--resume`` can mutate it again."""
    return {"template_choice": list(choice)} if choice is not None else None
