"""The LLM generator's closed loop (issue 6): generate, verify, feed the verdict back, generate again.

One :class:`LLMSearch` runs one problem within its budgets (wall time, candidates, tokens):

- the strategy (:mod:`kernelwright.search.strategies`) says what to ask for next; up to ``samples`` requests are in
  flight at once, so while the verifier checks one candidate the next ones are being written;
- each response is parsed (:func:`kernelwright.llm.parse.extract_modelnew`); a response without usable code is a
  recorded failure that the next prompt of its lineage hears about, never a crash;
- each candidate is verified with the full protocol in the verifier's isolated child (generated code never runs in
  this process), unless the database already holds a verdict for the same problem, source, arch, toolchain and
  options;
- everything — prompts, responses, candidates, verdicts — goes to the run database as it happens, so a run killed at
  any point resumes (``--resume RUN``) without losing a finished result.

The run ends with the best verified kernel (on a GPU re-verified with the ``torch.compile`` baselines), the
inference-time-scaling curve (fraction correct and best speedup against samples and rounds spent) and the outputs
``best.py``, ``verdict.json``, ``candidates.csv`` and ``report.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelwright.deadline import NO_DEADLINE, Deadline
from kernelwright.errors import ConfigError
from kernelwright.generate.families.base import DEFAULT_POLICY, Policy
from kernelwright.search.progress import Progress
from kernelwright.search.records import Candidate, SearchResult
from kernelwright.search.strategies import CROSSOVER, FRESH, MUTATE, TEMPLATE, Entry, Request, Strategy
from kernelwright.search.template_seed import (
    choice_meta,
    mutation_builder,
    next_mutation,
    seed_from_templates,
)

log = logging.getLogger(__name__)

GENERATION_SHARE = 0.9  # no new request after this share of the wall budget: the rest is for verification
MAX_CONSECUTIVE_CALL_FAILURES = 5  # the LLM keeps failing (server down, bad model name): stop, say why


@dataclass(frozen=True, kw_only=True)
class Budget:
    wall_s: float
    max_candidates: int | None = None  # LLM responses (and template mutations) asked for
    max_tokens: int | None = None  # prompt + completion tokens
    # How long the winner's final verify (with the torch.compile baselines) may run past the wall budget: 0 (the
    # budget is a promise: only the time left, and none once it is spent), or a bench's --verify-limit.
    verify_allowance_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class PromptContext:
    """What every prompt needs besides the attempts: the problem and the target."""

    problem_source: str
    problem_name: str
    arch: str
    gpu: Any = None  # kernelwright.hardware GpuSpec
    ceilings: Mapping[str, Any] | None = None
    policy: Policy = DEFAULT_POLICY
    language: str = "triton"


@dataclass
class LLMSearch:
    """One run of the loop. ``client`` needs ``submit(messages, tag=...) -> Future`` and ``usage``; ``evaluator``
    needs ``verify(candidate, compile_baseline=...)`` and ``timed``; ``db`` is a :class:`~kernelwright.search.db.
    RunDB` with the run already started (or resumed)."""

    problem: Path
    out_dir: Path
    strategy: Strategy
    client: Any
    evaluator: Any
    db: Any
    run_id: int
    budget: Budget
    context: PromptContext
    device: str
    options_key: str
    toolchain: str
    template_builder: Any = None  # CandidateBuilder, for template mutations in hybrid runs
    ranker: Any = None  # the cost model (costmodel/ranker.py): which configuration a template mutation tries
    progress: Progress = field(default_factory=lambda: Progress(llm=True))
    seed: int = 0
    session: int = 0  # how many times the run was resumed: call tags stay unique across sessions

    def __post_init__(self) -> None:
        # As the run database hashes the problem (its text: a file with CRLF line ends hashes the same way there).
        self.problem_sha = hashlib.sha256(self.problem.read_text().encode()).hexdigest()
        (self.out_dir / "candidates").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._seq = max((e.index for e in self.strategy.entries), default=0)  # resumed: after the replayed ones
        self.closed = False  # set once the run is over: calls still running then are abandoned
        self._asked = 0
        self._deadline: Deadline = NO_DEADLINE  # the budget's end, set when the loop starts
        self._generating = 0  # LLM calls in flight
        self._call_ids: dict[str, int] = {}
        self._consecutive_failures = 0
        self._last_call_error = ""
        self._rng = random.Random(self.seed)

    # -- the database hook for the LLM client --------------------------------------------------------------------
    def on_call(self, record: Any) -> None:
        """Store every LLM call (prompt, response, reasoning, tokens, cost); runs on the client's threads."""
        completion = record.completion
        try:
            call_id = self.db.record_llm_call(
                self.run_id, tag=record.tag, model=record.model, base_url=record.base_url,
                messages=list(record.messages), response_text=completion.text if completion else None,
                reasoning_text=completion.reasoning if completion else None,
                prompt_tokens=completion.prompt_tokens if completion else None,
                completion_tokens=completion.completion_tokens if completion else None,
                cost_usd=completion.cost_usd if completion else None, latency_s=record.latency_s,
                attempts=record.attempts, error=record.error)
        except Exception:  # the database was closed under a call abandoned at the deadline
            if self.closed:
                log.info("LLM call %s ended after the run; not stored", record.tag)
            else:
                log.warning("could not store LLM call %s", record.tag, exc_info=True)
            return
        with self._lock:
            self._call_ids[record.tag] = call_id

    # -- the loop ------------------------------------------------------------------------------------------------
    def run(self, *, pending_sources: list[Entry] | None = None) -> SearchResult:
        started = time.monotonic()
        generation_deadline = started + self.budget.wall_s * GENERATION_SHARE
        hard_deadline = started + self.budget.wall_s
        self._deadline = Deadline(hard_deadline)  # what every LLM call and verify is given
        evaluations = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelwright-verify")
        in_flight: dict[Future, tuple[str, Request, Any]] = {}
        stop_reason = ""
        interrupted = False
        for entry in pending_sources or []:  # resumed: generated but never verified
            self._evaluate(evaluations, in_flight, entry, None)
        try:
            while True:
                now = time.monotonic()
                stop_reason = stop_reason or self._stop_reason(now, generation_deadline)
                while not stop_reason:
                    request = self.strategy.next_request()
                    if request is None:
                        break
                    self._start(request, in_flight, evaluations)
                    stop_reason = self._stop_reason(time.monotonic(), generation_deadline)
                if not in_flight:
                    stop_reason = stop_reason or "the strategy had nothing more to ask"
                    break
                if now >= hard_deadline:
                    # Out of time: abandon the LLM calls and the verifications not started yet (their candidates
                    # stay in the database unverified, for --resume); wait only for the one running.
                    for future, (kind, _, _) in list(in_flight.items()):
                        if kind == "generate" or future.cancel():
                            future.cancel()
                            del in_flight[future]
                    if not in_flight:
                        break
                timeout = max(0.05, min(1.0, hard_deadline - now)) if now < hard_deadline else 1.0
                done, _ = wait(list(in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
                for future in done:
                    kind, request, extra = in_flight.pop(future)
                    if kind == "generate":
                        self._generating -= 1
                        self._generated(future, request, extra, in_flight, evaluations)
                    else:
                        self._verified(future, request, extra)
                self.progress.tokens = self._tokens()
                self.progress.show()
        except KeyboardInterrupt:
            interrupted = True
            stop_reason = "interrupted (Ctrl-C): the best verified kernel so far was kept"
        finally:
            evaluations.shutdown(wait=not interrupted, cancel_futures=True)
        self.progress.note = f"({stop_reason})"
        self.progress.show(force=True)
        best = self.strategy.best()
        if best is not None and not interrupted:
            try:
                best = self._final(best)
            except KeyboardInterrupt:  # the winner keeps the verdict it has; the outputs are still written
                interrupted = True
                stop_reason = "interrupted (Ctrl-C) during the winner's final verification: the best was kept"
        return SearchResult(
            run_id=self.run_id, problem=self.problem, out_dir=self.out_dir, strategy=self.strategy.name,
            entries=tuple(self.strategy.entries), best=best, stop_reason=stop_reason, interrupted=interrupted,
            elapsed_s=time.monotonic() - started, usage=self._usage(), scaling=scaling_curve(self.strategy),
            device=self.device, arch=self.context.arch, timed=bool(self.evaluator.timed), policy=self.context.policy)

    def _stop_reason(self, now: float, deadline: float) -> str:
        b = self.budget
        if now >= deadline:
            return f"wall-time budget ({b.wall_s:.0f} s) spent"
        if b.max_candidates is not None and self._asked >= b.max_candidates:
            return f"candidate budget ({b.max_candidates}) spent"
        if b.max_tokens is not None and self._projected_tokens() >= b.max_tokens:
            return f"token budget ({b.max_tokens}) spent"
        if self._consecutive_failures >= MAX_CONSECUTIVE_CALL_FAILURES:
            return f"the LLM calls fail: {self._last_call_error}"
        return ""

    def _projected_tokens(self) -> int:
        """Tokens spent plus what the calls in flight will likely spend (the mean of the calls so far), so the
        token budget is not overshot by a whole round of parallel samples."""
        spent, done = self._tokens(), self.client.usage.calls - self.client.usage.failures
        return spent + (spent // done if done else 0) * self._generating

    def _tokens(self) -> int:
        usage = self.client.usage
        return int(usage.prompt_tokens + usage.completion_tokens)

    def _usage(self) -> dict[str, Any]:
        u = self.client.usage
        return {"calls": u.calls, "failures": u.failures, "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens, "cost_usd": u.cost_usd}

    # -- requests ------------------------------------------------------------------------------------------------
    def _start(self, request: Request, in_flight: dict, evaluations: ThreadPoolExecutor) -> None:
        self._asked += 1
        self.progress.asked = self._asked
        if request.kind == TEMPLATE:
            entry = self._template_mutation(request)
            if entry is not None:
                self._evaluate(evaluations, in_flight, entry, request)
                return
            # Every neighbouring configuration was tried: the LLM mutates the parent instead (the slot is not lost).
            request = replace(request, kind=MUTATE)
        tag = f"run{self.run_id}s{self.session}-q{self._asked:04d}-L{request.lineage}R{request.round}"
        messages = self.messages_for(request)
        # No call outlives the budget: one abandoned at the deadline would hold its thread (and the interpreter's
        # exit) until its own timeout.
        in_flight[self.client.submit(messages, tag=tag, deadline=self._deadline)] = ("generate", request, tag)
        self._generating += 1

    def messages_for(self, request: Request) -> list[dict[str, str]]:
        from kernelwright.llm import prompting

        ctx = self.context
        common = {"problem_source": ctx.problem_source, "problem_name": ctx.problem_name, "arch": ctx.arch,
                  "gpu": ctx.gpu, "ceilings": ctx.ceilings, "policy": ctx.policy, "language": ctx.language}
        if request.kind == MUTATE:
            parent = _attempt(request.parents[0])
            return prompting.build_mutation_messages(parent=parent, stage=prompting.choose_stage(parent), **common)
        if request.kind == CROSSOVER:
            a, b = (_attempt(p) for p in request.parents)
            return prompting.build_crossover_messages(a=a, b=b, stage=prompting.choose_stage(a), **common)
        if request.kind == FRESH:
            # Independent samples see only the template library's seed (hybrid), never each other.
            seed = None
            for s in self.strategy.seeds:
                seed = s if seed is None or (s.median_ms or 0) < (seed.median_ms or 0) else seed
            best = _attempt(seed) if seed is not None and seed.passed else None
            return prompting.build_messages(stage=prompting.choose_stage(best), best=best, last=None, **common)
        best_entry = self.strategy.best(request.lineage)
        best = _attempt(best_entry) if best_entry is not None else None
        last = _attempt(request.parents[0]) if request.parents else None
        if last is not None and best_entry is not None and request.parents[0] is best_entry:
            last = None  # the best is the last: say it once
        return prompting.build_messages(stage=prompting.choose_stage(best), best=best, last=last, **common)

    def _generated(self, future: Future, request: Request, tag: str, in_flight: dict,
                   evaluations: ThreadPoolExecutor) -> None:
        from kernelwright.llm.parse import ParseFailure, extract_modelnew

        origin = {MUTATE: "mutation", CROSSOVER: "crossover"}.get(request.kind, "llm")
        try:
            completion = future.result()
        except Exception as exc:  # LLMError after retries, or anything the client raised
            self._consecutive_failures += 1
            self._last_call_error = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            # A rejected key, an unknown model, no openai package: every later call fails the same way.
            if getattr(exc, "fatal", False) or isinstance(exc, ConfigError):
                self._consecutive_failures = MAX_CONSECUTIVE_CALL_FAILURES
            self._observe(Entry(index=self._next_index(), lineage=request.lineage, round=request.round,
                                origin=origin, source=None, failure=f"the LLM call failed: {self._last_call_error}"))
            return
        self._consecutive_failures = 0
        try:
            source = extract_modelnew(completion.text, finish_reason=completion.finish_reason)
        except ParseFailure as exc:
            self._observe(Entry(index=self._next_index(), lineage=request.lineage, round=request.round,
                                origin=origin, source=None, failure=str(exc)))
            return
        with self._lock:
            call_id = self._call_ids.get(tag)
        entry = self._register(source, origin=origin, request=request, llm_call_id=call_id)
        self._evaluate(evaluations, in_flight, entry, request)

    def _register(self, source: str, *, origin: str, request: Request, llm_call_id: int | None,
                  template_choice: tuple[int, ...] | None = None, path: Path | None = None) -> Entry:
        parents = tuple(p.candidate_id for p in request.parents if p.candidate_id is not None)
        candidate_id, _ = self.db.add_candidate(
            self.run_id, source, origin=origin, parent_id=parents[0] if parents else None,
            parent2_id=parents[1] if len(parents) > 1 else None, lineage=request.lineage, round=request.round,
            llm_call_id=llm_call_id, meta=choice_meta(template_choice))
        if path is None:
            path = self.out_dir / "candidates" / f"k{candidate_id:04d}.py"
            path.write_text(source)
        return Entry(index=-1, lineage=request.lineage, round=request.round, origin=origin, source=source,
                     candidate_id=candidate_id, parents=parents, path=str(path), template_choice=template_choice)

    def _evaluate(self, evaluations: ThreadPoolExecutor, in_flight: dict, entry: Entry,
                  request: Request | None) -> None:
        from kernelwright.verify.records import Verdict

        sha = hashlib.sha256(entry.source.encode()).hexdigest()
        cached = self.db.cached_verdict(self.problem_sha, sha, arch=self.context.arch, toolchain=self.toolchain,
                                        options_key=self.options_key)
        if cached is not None and cached.get("status") not in TRANSIENT:
            # The same kernel, verified before for this problem, arch, toolchain and options.
            verdict = Verdict.from_json(cached)
            self.db.record_verdict(entry.candidate_id, cached, arch=self.context.arch, toolchain=self.toolchain,
                                   options_key=self.options_key)
            self._observe(replace(entry, verdict=verdict))
            return
        candidate = Candidate(index=entry.candidate_id or 0, label=f"{entry.origin} L{entry.lineage}R{entry.round}",
                              choice=entry.template_choice or (), configs=(), path=Path(entry.path or ""),
                              sha256=sha)
        future = evaluations.submit(self.evaluator.verify, candidate, compile_baseline=False, deadline=self._deadline)
        in_flight[future] = ("verify", request, entry)

    def _verified(self, future: Future, request: Request | None, entry: Entry) -> None:
        from kernelwright.verify.records import verdict_json

        try:
            verdict = future.result()
        except Exception as exc:  # a defect in the verifier itself: the candidate gets no verdict, the run goes on
            log.exception("verification failed")
            self._observe(replace(entry, failure=f"the verifier failed: {type(exc).__name__}: {exc}"[:300]))
            return
        self.db.record_verdict(entry.candidate_id, json.loads(verdict_json(verdict)), arch=self.context.arch,
                               toolchain=self.toolchain, options_key=self.options_key)
        self._observe(replace(entry, verdict=verdict))

    def _observe(self, entry: Entry) -> None:
        if entry.index < 0:
            entry = replace(entry, index=self._next_index())
        self.strategy.observe(entry)
        p = self.progress
        p.verified += entry.verdict is not None
        p.correct += entry.passed
        best = self.strategy.best()
        if best is not None:
            p.best_ms, p.best_speedup = best.median_ms, best.speedup_vs_eager
        p.show()

    def _next_index(self) -> int:
        self._seq += 1
        return self._seq

    # -- template mutations (hybrid) -----------------------------------------------------------------------------
    def _template_mutation(self, request: Request) -> Entry | None:
        builder = self.template_builder
        parent = request.parents[0]
        if builder is None or parent.template_choice is None:
            return None
        choice = next_mutation(builder, parent.template_choice, self._rng, self.ranker)
        if choice is None:
            return None
        g = next(g for g, (a, b) in enumerate(zip(choice, parent.template_choice)) if a != b)
        candidate = builder.build(choice, f"group {g} config {choice[g]}")
        return self._register(candidate.path.read_text(), origin="template", request=request, llm_call_id=None,
                              template_choice=choice, path=candidate.path)

    # -- the winner ----------------------------------------------------------------------------------------------
    def _final(self, best: Entry) -> Entry:
        """On a GPU the winner is verified once more, now with the torch.compile baselines (a template seed already
        was, by the template search) — within the budget plus its verify allowance; with none left, the winner
        keeps the verdict it has and the progress line says why."""
        if not self.evaluator.timed or best.path is None or best.origin == "seed":
            return best
        from kernelwright.verify.records import verdict_json

        end = self._deadline if self._deadline.bounded else Deadline(time.monotonic())
        deadline = end.extended(self.budget.verify_allowance_s)
        if deadline.expired(margin_s=1.0):
            self.progress.note = "(budget spent: the winner keeps its verdict, without the torch.compile baselines)"
            self.progress.show(force=True)
            return best

        candidate = Candidate(index=best.candidate_id or 0, label="winner", choice=(), configs=(),
                              path=Path(best.path), sha256=hashlib.sha256((best.source or "").encode()).hexdigest())
        verdict = self.evaluator.verify(candidate, compile_baseline=True, deadline=deadline)
        if best.candidate_id is not None:
            self.db.record_verdict(best.candidate_id, json.loads(verdict_json(verdict)), arch=self.context.arch,
                                   toolchain=self.toolchain, options_key=self.options_key + "+compile")
        return replace(best, verdict=verdict) if verdict.passed else best


def _attempt(entry: Entry | None):
    from kernelwright.llm.prompting import Attempt

    if entry is None:
        return None
    label = f"{entry.origin} (lineage {entry.lineage}, round {entry.round})"
    return Attempt(source=entry.source, verdict=entry.verdict, failure=entry.failure, label=label)


def scaling_curve(strategy: Strategy) -> dict[str, Any]:
    """Fraction correct and best speedup as functions of samples spent (in the order they finished) and of rounds
    (per lineage) — the inference-time-scaling curve of one run. Seeds from the template library are not samples."""
    entries = sorted((e for e in strategy.entries if e.origin != "seed"), key=lambda e: e.index)
    by_samples = []
    correct = 0
    best: Entry | None = None
    from kernelwright.search.strategies import better

    for k, e in enumerate(entries, start=1):
        correct += e.passed
        best = better(best, e)
        by_samples.append({"samples": k, "correct": correct, "fraction_correct": correct / k,
                           "solved": bool(best and best.passed),
                           "best_ms": best.median_ms if best and best.passed else None,
                           "best_speedup_vs_eager": best.speedup_vs_eager if best and best.passed else None})
    lineages = sorted({e.lineage for e in entries})
    max_round = max((e.round for e in entries), default=-1)
    by_rounds = []
    for r in range(max_round + 1):
        upto = [e for e in entries if e.round <= r]
        solved = {e.lineage for e in upto if e.passed}
        round_best: Entry | None = None
        for e in upto:
            round_best = better(round_best, e)
        by_rounds.append({"round": r, "lineages": len(lineages), "lineages_correct": len(solved),
                          "fraction_correct": len(solved) / len(lineages) if lineages else 0.0,
                          "best_speedup_vs_eager": round_best.speedup_vs_eager if round_best else None})
    return {"by_samples": by_samples, "by_rounds": by_rounds}


# Verdicts that say more about the moment than the kernel: verified again rather than taken from the cache.
TRANSIENT = frozenset({"timeout", "crashed"})



def optimize_with_llm(problem: str | Path, *, out_dir: str | Path, budget_s: float | None = None,
                      deadline: Deadline | None = None, generator: str = "llm",
                      strategy: str = "refine", samples: int = 4, device: str | None = None, arch: str | None = None,
                      policy: Policy = DEFAULT_POLICY, model: str | None = None, base_url: str | None = None,
                      db_path: Path | None = None, resume: int | None = None, max_candidates: int | None = None,
                      max_tokens: int | None = None, language: str = "triton", seed: int = 0,
                      evaluator: Any = None, progress_stream: Any = None,
                      verify_allowance_s: float = 0.0, use_model: bool = True) -> SearchResult:
    """``kernelwright optimize --generator llm|hybrid``: set up the client, the database, the evaluator and the
    strategy; for ``hybrid`` first let the template library find a verified seed (a third of the budget); run the
    loop; write the outputs. The budget: ``deadline`` (the caller's), else ``budget_s`` from now. ``evaluator``
    can be injected (tests). ``verify_allowance_s``: how long the winner's final verify may run past the budget
    (a bench's --verify-limit; 0: none)."""
    from kernelwright.config import redact_url
    from kernelwright.errors import InputError
    from kernelwright.hardware.local import resolve_device, target_arch
    from kernelwright.search.db import RunDB, toolchain_fingerprint, verdict_options_key
    from kernelwright.search.evaluate import evaluator_for
    from kernelwright.search.outputs import write_search_outputs
    from kernelwright.search.strategies import make_strategy

    if deadline is None or not deadline.bounded:
        deadline = Deadline.after(180.0 if budget_s is None else budget_s)
    budget_s = deadline.left()
    problem = Path(problem)
    if not problem.is_file():
        raise InputError(f"problem file {problem} does not exist: give the path of a KernelBench problem file")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(device)
    arch = target_arch(device, arch)
    try:
        strat = make_strategy(strategy, samples, seed=seed)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    from kernelwright.llm.client import LLMClient
    from kernelwright.llm.settings import resolve_settings

    settings = resolve_settings(model=model, base_url=base_url)  # ConfigError (one line) without a key
    holder: dict[str, LLMSearch] = {}  # the client stores each call through the search, made below
    client = LLMClient(settings, on_call=lambda record: holder["search"].on_call(record))
    evaluator = evaluator or evaluator_for(problem, device, arch, policy)
    toolchain = toolchain_fingerprint()
    reduced = not getattr(evaluator, "timed", False)
    gpu = _gpu_facts(arch, device)
    # Timings belong to one GPU model (an H100 and an H200 are both sm_90a): the cache key names it.
    device_name = getattr(gpu, "name", device) if device == "cuda" else device
    key = verdict_options_key(device=device_name, policy=policy, reduced=reduced)
    db = RunDB(db_path)
    source = problem.read_text()
    problem_id = db.add_problem(problem, source)
    settings_record = {"problem": str(problem), "out_dir": str(out), "budget_s": budget_s, "generator": generator,
                       "strategy": strategy, "samples": samples, "model": settings.model,
                       "base_url": redact_url(settings.base_url),  # a key in the URL stays out of the file
                       "max_candidates": max_candidates, "max_tokens": max_tokens, "language": language,
                       "allow_tf32": policy.allow_tf32, "allow_reduced_precision": policy.allow_reduced_precision}
    pending: list[Entry] = []
    if resume is not None:
        stored = db.run(resume)
        if stored.problem_id != problem_id:  # checked before the run is taken over
            db.close()
            raise InputError(f"run {resume} was for another problem (or the problem file changed since): "
                             "resume it with the same problem file, or start a new run")
        # Verdicts judged under one policy must not mix with another's, nor one strategy's state with another's.
        changed = [f"{k} {stored.settings.get(k)!r} -> {settings_record[k]!r}"
                   for k in ("strategy", "language", "allow_tf32", "allow_reduced_precision", "generator")
                   if k in stored.settings and stored.settings.get(k) != settings_record[k]]
        if changed:
            db.close()
            raise InputError(f"run {resume} was started with other settings ({'; '.join(changed)}): resume it "
                             "with the same --strategy/--language/--generator/precision flags, or start a new run")
        db.resume_run(resume)
        run_id = resume
        pending = _restore(db, run_id, strat, out)
    else:
        run_id = db.start_run(problem_id, generator=generator, strategy=strategy, settings=settings_record,
                              arch=arch, toolchain=toolchain, device=device)
    ctx = PromptContext(problem_source=source, problem_name=problem.name, arch=arch, gpu=gpu,
                        ceilings=None, policy=policy, language=language)
    search: LLMSearch | None = None
    try:
        template_builder = None
        if generator == "hybrid" and resume is None:
            template_builder = seed_from_templates(problem, out, deadline.share(1 / 3), device, arch, policy,
                                                    evaluator, db, run_id, strat)
        elif generator == "hybrid":
            tried = [Candidate(index=e.candidate_id or 0, label="tried", choice=e.template_choice, configs=(),
                               path=Path(e.path or ""), sha256=hashlib.sha256((e.source or "").encode()).hexdigest())
                     for e in [*strat.seeds, *strat.entries, *pending] if e.template_choice is not None]
            template_builder = mutation_builder(problem, out, arch, policy, tried)
        ranker = None
        if template_builder is not None and getattr(evaluator, "timed", False):  # what a GPU times (--no-model: not)
            from kernelwright.costmodel.ranker import search_ranker

            ranker = search_ranker(arch, enabled=use_model)
        remaining = max(1.0, deadline.left())
        search = LLMSearch(problem=problem, out_dir=out, strategy=strat, client=client, evaluator=evaluator, db=db,
                           run_id=run_id, budget=Budget(wall_s=remaining, max_candidates=max_candidates,
                                                        max_tokens=max_tokens, verify_allowance_s=verify_allowance_s),
                           context=ctx, device=device, options_key=key, toolchain=toolchain,
                           template_builder=template_builder, ranker=ranker, seed=seed,
                           progress=Progress(stream=progress_stream, llm=True),
                           session=db.run(run_id).resumes)
        holder["search"] = search
        result = search.run(pending_sources=pending)
        write_search_outputs(result)
        best = result.best
        db.finish_run(run_id, "interrupted" if result.interrupted else "finished", {
            "stop_reason": result.stop_reason, "elapsed_s": round(result.elapsed_s, 1), "usage": dict(result.usage),
            "scaling": dict(result.scaling), "best_candidate_id": best.candidate_id if best else None,
            "best_status": str(best.verdict.status) if best and best.verdict else None,
            "best_ms": best.median_ms if best else None,
            "best_speedup_vs_eager": best.speedup_vs_eager if best else None})
        return result
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            db.finish_run(run_id, "interrupted", {"stop_reason": "interrupted (Ctrl-C)"})
        else:
            db.finish_run(run_id, "failed", {"stop_reason": f"the run stopped with an error: {exc!r}"[:300]})
        raise
    finally:
        if search is not None:
            search.closed = True
        # Calls still running are abandoned, not waited for: one can take timeout_s x retries, far past the budget.
        client.close(cancel_pending=True, wait=False)
        db.close()


def _gpu_facts(arch: str, device: str) -> Any:
    """The GPU the prompt describes: the local one on a GPU machine, else the knowledge base's flagship of the arch."""
    try:
        if device == "cuda":
            from kernelwright.hardware import local_gpu

            gpu = local_gpu()
            if gpu is not None:
                return gpu
        from kernelwright.hardware.spec import all_gpus

        matches = [g for g in all_gpus() if g.arch == arch]
        return max(matches, key=lambda g: g.sm_count) if matches else None
    except Exception:  # the prompt then carries the arch's features only
        log.debug("no GPU facts for %s", arch, exc_info=True)
        return None


def _restore(db: Any, run_id: int, strategy: Strategy, out: Path) -> list[Entry]:
    """Rebuild the strategy's state from the database — verified candidates, and the calls that gave no candidate
    (failed, or answered without usable code: re-parsed for the same one-line reason), in the order they happened,
    so lineages keep their last feedback and the scaling curve counts every sample; return the candidates generated
    but never verified."""
    import re

    from kernelwright.llm.parse import ParseFailure, extract_modelnew
    from kernelwright.verify.records import Verdict

    pending = []
    events: list[tuple[float, Entry]] = []
    (out / "candidates").mkdir(parents=True, exist_ok=True)
    rows = db.candidates(run_id)
    for row in rows:
        verdict = Verdict.from_json(db.verdict(row.verdict_id)) if row.verdict_id is not None else None
        parents = tuple(p for p in (row.parent_id, row.parent2_id) if p is not None)
        path = out / "candidates" / f"k{row.id:04d}.py"
        if not path.exists():
            path.write_text(row.source)
        choice = (row.meta or {}).get("template_choice")
        entry = Entry(index=0, lineage=row.lineage, round=row.round, origin=row.origin, source=row.source,
                      verdict=verdict, candidate_id=row.id, parents=parents, path=str(path),
                      template_choice=tuple(choice) if choice is not None else None)
        if row.origin == "seed":
            strategy.seeds.append(entry)
        elif verdict is None:
            pending.append(replace(entry, index=-1))  # numbered when its verdict comes
        else:
            events.append((row.created, entry))
    with_candidate = {row.llm_call_id for row in rows if row.llm_call_id is not None}
    for call in db.llm_calls(run_id):
        where = re.search(r"-L(\d+)R(\d+)$", call.tag)
        if call.id in with_candidate or where is None:
            continue
        if call.error:
            failure = f"the LLM call failed: {call.error}"
        else:
            try:
                extract_modelnew(call.response_text or "")
                failure = "the run stopped before this response was processed"
            except ParseFailure as exc:
                failure = str(exc)
        events.append((call.created, Entry(index=0, lineage=int(where.group(1)), round=int(where.group(2)),
                                           origin="llm", source=None, failure=failure)))
    for index, (_, entry) in enumerate(sorted(events, key=lambda e: e[0]), start=1):
        strategy.restore(replace(entry, index=index))
    for entry in pending:  # after the replay, which would otherwise count them as answered
        strategy.restore_pending(entry)
    return pending
