"""``kernelwright optimize``: the template generator's search, from a problem to a verified best kernel.

1. Capture and plan the problem (``kernelwright.generate``); what no template covers stays in PyTorch, and the
   report names it.
2. Build the default candidate (every group at its family's default configuration).
3. With a GPU: tune by coordinate descent — one group at a time, every configuration of its space with the others
   at their best so far — timing candidates in one long-lived worker (:mod:`kernelwright.search.worker`), within
   the wall-time budget. Then the fastest candidates (the finalists) get the verifier's full protocol, and the
   winner's verdict includes eager and ``torch.compile`` baselines.
4. Without a GPU: the default candidate is proven correct under the Triton interpreter and its kernels are compiled
   for the target arch for the instruction summary; nothing is timed, and the report says so.

Ctrl-C stops the search and still writes the best so far. Everything goes to ``out_dir``: ``best.py``,
``verdict.json``, ``candidates.csv``, ``report.md`` and ``candidates/``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kernelwright.generate.families.base import DEFAULT_POLICY, Config, Family, Policy
from kernelwright.generate.plan import Plan
from kernelwright.verify.records import Verdict

log = logging.getLogger(__name__)

FINALISTS = 3


@dataclass(frozen=True, kw_only=True)
class Candidate:
    index: int
    label: str  # "default", or which group's configuration changed
    choice: tuple[int, ...]  # per group: the index of its configuration in the family's space
    configs: tuple[Mapping[str, Any], ...]
    path: Path
    sha256: str


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

    def time(self, candidates: Sequence[Candidate], *, deadline: float | None = None) -> Iterator[Outcome]:
        """Quick correctness check and timing of each candidate, yielded as each finishes; candidates not reached
        by ``deadline`` (``time.monotonic()``) are left out."""

    def verify(self, candidate: Candidate, *, compile_baseline: bool) -> Verdict:
        """The verifier's full protocol."""


@dataclass
class Progress:
    """A one-line live status on stderr (candidates built / timed / verified, best speedup so far)."""

    stream: Any = None
    built: int = 0
    timed: int = 0
    verified: int = 0
    best_ms: float | None = None
    baseline_ms: float | None = None
    note: str = ""
    _last: float = field(default=0.0, repr=False)

    def show(self, force: bool = False) -> None:
        import sys

        stream = self.stream or sys.stderr
        now = time.monotonic()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        best = f"best {self.best_ms:.4f} ms" if self.best_ms else "best -"
        if self.best_ms and self.baseline_ms:
            best += f" ({self.baseline_ms / self.best_ms:.2f}x eager)"
        status_line(stream, f"built {self.built} | timed {self.timed} | verified {self.verified} | {best} {self.note}")

    def done(self) -> None:
        import sys

        stream = self.stream or sys.stderr
        self.show(force=True)
        if getattr(stream, "isatty", lambda: False)():
            stream.write("\n")


def status_line(stream: Any, line: str) -> None:
    """A live status line: rewritten in place on a terminal, one line each time elsewhere (logs, CI)."""
    if getattr(stream, "isatty", lambda: False)():
        stream.write("\r\033[K" + line[:160])
    else:
        stream.write(line + "\n")
    stream.flush()


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

    def build(self, choice: tuple[int, ...], label: str) -> Candidate:
        from kernelwright.generate.emit import emit

        if choice in self.by_choice:
            return self.by_choice[choice]
        configs = tuple(space[i] for space, i in zip(self.spaces, choice))
        source = emit(self.plan, self.families, configs, title=self.title)
        path = self.directory / f"c{self.count:03d}.py"
        path.write_text(source)
        candidate = Candidate(index=self.count, label=label, choice=choice, configs=configs, path=path,
                              sha256=hashlib.sha256(source.encode()).hexdigest())
        self.count += 1
        self.by_choice[choice] = candidate
        return candidate


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


def _tune(builder: CandidateBuilder, evaluator: Evaluator, deadline: float, progress: Progress,
          outcomes: dict[int, Outcome]) -> Candidate:
    """Time candidates until ``deadline``, one configuration group at a time; return the default candidate."""
    best_choice = [0] * len(builder.spaces)
    best_ms: float | None = None
    default = builder.build(tuple(best_choice), "default")
    batches: list[list[Candidate]] = [[default]]
    for g, space in enumerate(builder.spaces):
        batch = []
        for i in range(1, len(space)):
            batch.append((g, i))
        batches.append(batch)  # resolved against the best so far when its turn comes
    for position, batch in enumerate(batches):
        if time.monotonic() >= deadline:
            progress.note = "(budget spent)"
            return default
        if position == 0:
            candidates = batch
        else:
            candidates = []
            for g, i in batch:
                choice = list(best_choice)
                choice[g] = i
                candidates.append(builder.build(tuple(choice), f"group {g} config {i}"))
        progress.built = builder.count
        for outcome in evaluator.time([c for c in candidates if c.index not in outcomes], deadline=deadline):
            outcomes[outcome.candidate.index] = outcome
            progress.timed += 1
            if outcome.median_ms is not None and (best_ms is None or outcome.median_ms < best_ms):
                best_ms = outcome.median_ms
                best_choice = list(outcome.candidate.choice)
                progress.best_ms = best_ms
            progress.show()
            if time.monotonic() >= deadline:
                progress.note = "(budget spent)"
                return default
    return default


def optimize(problem: str | Path, *, out_dir: str | Path, budget_s: float = 180.0, device: str | None = None,
             arch: str | None = None, policy: Policy = DEFAULT_POLICY, evaluator: Evaluator | None = None,
             progress: Progress | None = None, families: Iterable[Family] | None = None) -> OptimizeResult:
    """Search the template space for ``problem``; write the results to ``out_dir``. Raises
    :class:`~kernelwright.errors.InputError` when the problem cannot be captured or no template covers any of it."""
    from kernelwright.config import config
    from kernelwright.search.outputs import write_outputs
    from kernelwright.verify.verifier import resolve_device

    started = time.monotonic()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(device)
    progress = progress or Progress()
    arch = arch or _local_arch(device) or config.arch
    the_plan, builder = template_builder(problem, out / "candidates", arch=arch, policy=policy, families=families)
    spaces = builder.spaces
    evaluator = evaluator or _default_evaluator(problem, device, arch, policy)
    outcomes: dict[int, Outcome] = {}
    interrupted = False
    deadline = started + budget_s * (0.75 if evaluator.timed else 1.0)  # keep a quarter for the finalists
    try:
        if evaluator.timed:
            default = _tune(builder, evaluator, deadline, progress, outcomes)
            finalists = sorted((o for o in outcomes.values() if o.median_ms is not None),
                               key=lambda o: o.median_ms or 0.0)[:FINALISTS]
            if not finalists and default.index not in outcomes:
                # The budget ran out before the tuner timed anything (on the H200, 2026-12-02, four problems
                # sharing the GPU waited for it past a 30 s budget): the default candidate still gets the
                # verifier's protocol, which times it, rather than the run ending with nothing.
                finalists = [Outcome(candidate=default, status="built")]
        else:
            default = builder.build(tuple(0 for _ in spaces), "default")
            finalists = [Outcome(candidate=default, status="built")]
            progress.built = builder.count
        for finalist in finalists:
            # Fastest first; the first to pass the full protocol wins. Failing finalists never reach the
            # baselines (the verifier skips them), so torch.compile is timed once, for the winner.
            progress.note = f"(verifying c{finalist.candidate.index:03d})"
            progress.show(force=True)
            verdict = evaluator.verify(finalist.candidate, compile_baseline=evaluator.timed)
            outcomes[finalist.candidate.index] = replace(finalist, status=str(verdict.status), verdict=verdict)
            progress.verified += 1
            progress.baseline_ms = (verdict.timing.get("eager") or {}).get("median_ms") or progress.baseline_ms
            if verdict.passed:
                break
    except KeyboardInterrupt:
        interrupted = True
        progress.note = "(interrupted: writing the best so far)"
    progress.done()
    best = _best(outcomes.values())
    result = OptimizeResult(problem=the_plan.graph.problem.path, out_dir=out, plan=the_plan,
                            outcomes=tuple(outcomes[i] for i in sorted(outcomes)), best=best,
                            timed=evaluator.timed, interrupted=interrupted, elapsed_s=time.monotonic() - started,
                            arch=arch, device=device, policy=policy)
    write_outputs(result)
    return result


def template_builder(problem: str | Path, directory: Path, *, arch: str, policy: Policy = DEFAULT_POLICY,
                     families: Iterable[Family] | None = None) -> tuple[Plan, CandidateBuilder]:
    """Capture and plan ``problem``; a builder of candidate files over the families' configuration spaces. Raises
    :class:`~kernelwright.errors.InputError` when the problem cannot be captured or no template covers any of it."""
    from kernelwright.errors import InputError
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan

    graph = capture(problem)
    family_list = list(families) if families is not None else load_families()
    by_name = {f.name: f for f in family_list}
    the_plan = plan(graph, family_list)
    if not the_plan.groups:
        ops = sorted({graph.node(n).op for n in the_plan.uncovered}) or ["(none)"]
        raise InputError(f"no template covers any part of {graph.problem.path.name} (aten {', '.join(ops)}); "
                         "use --generator llm for it")
    spaces = [by_name[g.family].space(graph, g, arch, policy) for g in the_plan.groups]
    return the_plan, CandidateBuilder(the_plan, by_name, spaces, directory, title=_title(graph.problem.path))


def _title(problem: Path) -> str:
    return f"kernelwright candidate for {problem.name}"


def same_candidate_at(problem: str | Path, candidate: Candidate, size_overrides: Mapping[str, int]) -> bool:
    """Whether the templates write exactly ``candidate``'s file for the problem at ``size_overrides`` (same groups,
    same configurations): then nothing in it depends on those sizes, and proving it there proves the file."""
    from kernelwright.generate.emit import emit
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan

    try:
        graph = capture(problem, size_overrides=size_overrides)
        families = {f.name: f for f in load_families()}
        the_plan = plan(graph, list(families.values()))
        if len(the_plan.groups) != len(candidate.configs):
            return False
        source = emit(the_plan, families, candidate.configs, title=_title(graph.problem.path))
    except Exception as exc:  # noqa: BLE001 - a problem that does not capture at those sizes: not the same
        log.info("the candidate could not be rewritten at %s: %s", dict(size_overrides), exc)
        return False
    return source == candidate.path.read_text()


def _best(outcomes: Iterable[Outcome]) -> Outcome | None:
    """A verified pass beats everything; among passes the fastest; without any, the fastest timed candidate."""
    outcomes = list(outcomes)
    passed = [o for o in outcomes if o.verdict is not None and o.verdict.passed]
    if passed:
        return min(passed, key=lambda o: (o.verdict.timing.get("candidate") or {}).get("median_ms", float("inf")))
    timed = [o for o in outcomes if o.median_ms is not None]
    if timed:
        return min(timed, key=lambda o: o.median_ms or 0.0)
    return outcomes[0] if outcomes else None


def _local_arch(device: str) -> str | None:
    if device != "cuda":
        return None
    try:
        from kernelwright.hardware import local_gpu

        gpu = local_gpu()
        return gpu.arch if gpu else None
    except Exception:
        return None


def _default_evaluator(problem: str | Path, device: str, arch: str, policy: Policy) -> Evaluator:
    from kernelwright.search.evaluate import CpuEvaluator, GpuEvaluator

    if device == "cuda":
        return GpuEvaluator(Path(problem), policy=policy)
    return CpuEvaluator(Path(problem), arch=arch, policy=policy)

