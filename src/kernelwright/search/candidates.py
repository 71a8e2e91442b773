"""Candidate files from the template library: capture and plan a problem, then write one ``ModelNew`` file per choice
of configurations (each choice once, by content)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kernelwright.generate.families.base import DEFAULT_POLICY, Config, Family, Policy
from kernelwright.generate.plan import Plan
from kernelwright.search.records import Candidate

log = logging.getLogger(__name__)


class CandidateBuilder:
    """Emits candidate files for choices of configurations, once each (by content)."""

    def __init__(self, the_plan: Plan, families: Mapping[str, Family], spaces: Sequence[Sequence[Config]],
                 directory: Path, title: str) -> None:
        self.plan, self.families, self.spaces = the_plan, families, spaces
        self.directory = directory
        self.title = title
        self.by_choice: dict[tuple[int, ...], Candidate] = {}
        self.count = 0
        directory.mkdir(parents=True, exist_ok=True)

    def source(self, choice: tuple[int, ...]) -> str:
        """The candidate file ``choice`` gives, written nowhere and not counted as built."""
        from kernelwright.generate.emit import emit

        if choice in self.by_choice:
            return self.by_choice[choice].path.read_text()
        configs = tuple(space[i] for space, i in zip(self.spaces, choice))
        return emit(self.plan, self.families, configs, title=self.title)

    def build(self, choice: tuple[int, ...], label: str) -> Candidate:
        if choice in self.by_choice:
            return self.by_choice[choice]
        configs = tuple(space[i] for space, i in zip(self.spaces, choice))
        source = self.source(choice)
        path = self.directory / f"c{self.count:03d}.py"
        path.write_text(source)
        candidate = Candidate(index=self.count, label=label, choice=choice, configs=configs, path=path,
                              sha256=hashlib.sha256(source.encode()).hexdigest())
        self.count += 1
        self.by_choice[choice] = candidate
        return candidate

    def derive(self, base: Candidate, source: str, label: str, *, ptx_passes: tuple[str, ...] = ()) -> Candidate:
        """A candidate written from ``base``'s file (a PTX rewrite of it): the same choice of configurations, a file
        and an index of its own; not what ``build`` returns for that choice."""
        path = self.directory / f"c{self.count:03d}.py"
        path.write_text(source)
        candidate = Candidate(index=self.count, label=label, choice=base.choice, configs=base.configs, path=path,
                              sha256=hashlib.sha256(source.encode()).hexdigest(), ptx_passes=ptx_passes)
        self.count += 1
        return candidate


def template_builder(problem: str | Path, directory: Path, *, arch: str, policy: Policy = DEFAULT_POLICY,
                     families: Iterable[Family] | None = None,
                     backend: str | None = None) -> tuple[Plan, CandidateBuilder]:
    """Capture and plan ``problem``; a builder of candidate files over the families' configuration spaces, kept to
    ``backend``'s (``triton``, ``cuda`` or ``all``; None: the ``backend`` setting). Raises
    :class:`~kernelwright.errors.InputError` when the problem cannot be captured or no template covers any of it."""
    from kernelwright.config import config
    from kernelwright.errors import UnsupportedProblem
    from kernelwright.generate.cuda import on_backend
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan

    graph = capture(problem)
    family_list = list(families) if families is not None else load_families()
    by_name = {f.name: f for f in family_list}
    the_plan = plan(graph, family_list, arch=arch)
    if not the_plan.groups:
        ops = sorted({graph.node(n).op for n in the_plan.uncovered}) or ["(none)"]
        raise UnsupportedProblem(f"no template covers any part of {graph.problem.path.name} (aten {', '.join(ops)}); "
                         "use --generator llm for it")
    chosen = backend or config.backend
    spaces = [on_backend(by_name[g.family].space(graph, g, arch, policy), chosen) for g in the_plan.groups]
    return the_plan, CandidateBuilder(the_plan, by_name, spaces, directory, title=_title(graph.problem.path))


def _title(problem: Path) -> str:
    return f"kernelwright candidate for {problem.name}"


def same_candidate_at(problem: str | Path, candidate: Candidate, size_overrides: Mapping[str, int], *,
                      arch: str | None = None) -> bool:
    """Whether the templates write exactly ``candidate``'s file for the problem at ``size_overrides`` (same groups,
    same configurations): then nothing in it depends on those sizes, and proving it there proves the file."""
    from kernelwright.generate.emit import emit
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan

    try:
        graph = capture(problem, size_overrides=size_overrides)
        families = {f.name: f for f in load_families()}
        the_plan = plan(graph, list(families.values()), arch=arch)
        if len(the_plan.groups) != len(candidate.configs):
            return False
        source = emit(the_plan, families, candidate.configs, title=_title(graph.problem.path))
    except Exception as exc:  # noqa: BLE001 - a problem that does not capture at those sizes: not the same
        log.info("the candidate could not be rewritten at %s: %s", dict(size_overrides), exc)
        return False
    return source == candidate.path.read_text()
