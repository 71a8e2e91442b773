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

import contextlib
import json
import logging
import shutil
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelwright.deadline import Deadline
from kernelwright.errors import InputError
from kernelwright.generate.families.base import DEFAULT_POLICY, Family, Policy
from kernelwright.generate.plan import Plan, node_work
from kernelwright.hardware.local import target_arch
from kernelwright.search import rewrites as ptx
from kernelwright.search.candidates import CandidateBuilder, template_builder
from kernelwright.search.evaluate import evaluator_for
from kernelwright.search.outputs import write_outputs
from kernelwright.search.progress import Progress
from kernelwright.search.records import Candidate, Evaluator, OptimizeResult, Outcome, RewriteTrial

log = logging.getLogger(__name__)

FINALISTS = 3


class _RunRecord:
    """The template search's run in the run database, written as it goes, so ``kernelwright runs`` lists template
    runs beside the LLM loop's (a killed search leaves what it had; readers call it interrupted). The database is a
    record, not the search: if it cannot be written, the search goes on and says so once."""

    def __init__(self, problem: Path, *, arch: str, device: str, policy: Policy, budget_s: float, out: Path,
                 db_path: Path | None) -> None:
        self.db: Any = None
        self.ids: dict[int, int] = {}
        try:
            from kernelwright.search.db import RunDB, toolchain_fingerprint, verdict_options_key

            source = problem.read_text()
            device_name = device
            if device == "cuda":
                from kernelwright.hardware import local_gpu

                gpu = local_gpu()
                device_name = gpu.name if gpu is not None else device
            self.toolchain = toolchain_fingerprint()
            self.key = verdict_options_key(device=device_name, policy=policy, reduced=device != "cuda")
            self.arch = arch
            self.db = RunDB(db_path)
            problem_id = self.db.add_problem(problem, source)
            self.run_id = self.db.start_run(
                problem_id, generator="templates", strategy="coordinate-descent", arch=arch,
                toolchain=self.toolchain, device=device_name,
                settings={"problem": str(problem), "out_dir": str(out), "budget_s": budget_s,
                          "allow_tf32": policy.allow_tf32, "allow_reduced_precision": policy.allow_reduced_precision})
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            log.warning("the run database could not be written (%s); the search goes on without it", exc)
            self.close()

    def _guard(self, what: str, fn: Any) -> None:
        if self.db is None:
            return
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            log.warning("the run database could not record %s (%s); the search goes on without it", what, exc)
            self.close()

    def outcome(self, outcome: Outcome) -> None:
        def write() -> None:
            c = outcome.candidate
            if c.index not in self.ids:
                self.ids[c.index], _ = self.db.add_candidate(self.run_id, c.path.read_text(), origin="template",
                                                             meta={"template_choice": list(c.choice),
                                                                   "label": c.label})
            cid = self.ids[c.index]
            if outcome.verdict is not None:
                from kernelwright.verify.records import verdict_json

                self.db.record_verdict(cid, json.loads(verdict_json(outcome.verdict)), arch=self.arch,
                                       toolchain=self.toolchain, options_key=self.key)
            else:
                self.db.update_candidate(cid, status=outcome.status, median_ms=outcome.median_ms,
                                         error=outcome.error)

        self._guard(f"candidate c{outcome.candidate.index:03d}", write)

    def finish(self, result: OptimizeResult) -> None:
        best = result.best
        verdict = best.verdict if best else None
        summary = {"stop_reason": "interrupted (Ctrl-C)" if result.interrupted else "search done",
                   "elapsed_s": round(result.elapsed_s, 1),
                   "best_candidate_id": self.ids.get(best.candidate.index) if best else None,
                   "best_status": str(verdict.status) if verdict else (best.status if best else None),
                   "best_ms": verdict.median_ms() if verdict else None,
                   "uncovered": result.plan.describe()[-1] if result.plan.uncovered else ""}
        self._guard("the run's end", lambda: self.db.finish_run(
            self.run_id, "interrupted" if result.interrupted else "finished", summary))
        self.close()

    def fail(self, exc: BaseException) -> None:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        self._guard("the run's end", lambda: self.db.finish_run(
            self.run_id, status, {"stop_reason": f"the search stopped: {exc!r}"[:300]}))
        self.close()

    def close(self) -> None:
        if self.db is not None:
            with contextlib.suppress(Exception):
                self.db.close()
        self.db = None


def group_order(the_plan: Plan) -> list[int]:
    """The plan's group indices, heaviest first by the estimate of their nodes' work (generate.plan.node_work);
    ties keep the graph's order."""
    work = [sum(node_work(the_plan.graph, the_plan.graph.node(n)) for n in g.nodes) for g in the_plan.groups]
    return sorted(range(len(work)), key=lambda g: -work[g])


def _tune(builder: CandidateBuilder, evaluator: Evaluator, deadline: Deadline, progress: Progress,
          outcomes: dict[int, Outcome], record: _RunRecord, ranker: Any = None) -> Candidate:
    """Time candidates until ``deadline``, one configuration group at a time; return the default candidate. With a
    ``ranker`` (the cost model: costmodel/ranker.py), each group's alternatives are timed in its order, its top
    part and an explorer only."""
    best_choice = [0] * len(builder.spaces)
    best_ms: float | None = None
    default = builder.build(tuple(best_choice), "default")
    # The first batch is the default and the first group's other configurations (they vary only from the defaults,
    # so nothing waits on a result): one worker, one wait for the GPU lock, for a single-group problem's space.
    # Timed alone first, the default cost a worker start and a lock wait of its own: in a parallel bench on the
    # H200 (run 38, 2026-12-03) log_softmax_bf16's search timed only the default in its 60 s, 16% slower than the
    # best of its four configurations (run 43).
    # Groups in order of their share of the work, the heaviest first: a network's budget reaches its big
    # convolutions before its pooling and pointwise tails (run 44: ResNet18's 45 s search timed only the first of
    # 40-odd groups, in graph order).
    batches: list[list[tuple[int, int]]] = []
    for g in group_order(builder.plan):
        batches.append([(g, i) for i in range(1, len(builder.spaces[g]))])  # resolved against the best so far
    for position, batch in enumerate(batches or [[]]):
        if deadline.expired():
            progress.note = "(budget spent)"
            return default
        alternatives = []
        for g, i in batch:
            choice = list(best_choice)
            choice[g] = i
            alternatives.append(builder.build(tuple(choice), f"group {g} config {i}"))
        if ranker is not None and batch:
            alternatives = ranker.order(alternatives, builder.plan.groups[batch[0][0]].family)
        candidates = ([default] if position == 0 else []) + alternatives
        progress.built = builder.count
        for outcome in evaluator.time([c for c in candidates if c.index not in outcomes], deadline=deadline):
            outcomes[outcome.candidate.index] = outcome
            record.outcome(outcome)
            progress.timed += 1
            if outcome.median_ms is not None and (best_ms is None or outcome.median_ms < best_ms):
                best_ms = outcome.median_ms
                best_choice = list(outcome.candidate.choice)
                progress.best_ms = best_ms
            progress.show()
            if deadline.expired():
                progress.note = "(budget spent)"
                return default
    return default


def optimize(problem: str | Path, *, out_dir: str | Path, budget_s: float = 180.0, device: str | None = None,
             arch: str | None = None, policy: Policy = DEFAULT_POLICY, evaluator: Evaluator | None = None,
             progress: Progress | None = None, families: Iterable[Family] | None = None,
             db_path: Path | None = None, verify_allowance_s: float = 0.0,
             backend: str | None = None, use_model: bool = True, deadline: Deadline | None = None,
             ptx_rewrites: bool = True) -> OptimizeResult:
    """Search the template space for ``problem`` (``backend``: the back ends tried, as ``--backend``); write the
    results to ``out_dir`` and the run database (``db_path``, default ``config.cache_dir / "runs.sqlite"``).
    The budget — ``deadline`` (a caller's, such as the command's whole ``--budget``), else ``budget_s`` from now —
    covers the search and the finalists' verifies; with ``verify_allowance_s`` (a bench, which wants whole rows) the
    search has the budget and a finalist's verify may run that much longer. Raises
    :class:`~kernelwright.errors.InputError` when the problem cannot be captured or no template covers any of it."""
    from kernelwright.hardware.local import resolve_device

    started = time.monotonic()
    deadline = Deadline.after(budget_s) if deadline is None or not deadline.bounded else deadline
    budget_s = deadline.left()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file: name a folder for the run's outputs (best.py, report.md, ...)")
    device = resolve_device(device)
    progress = progress or Progress()
    arch = target_arch(device, arch)
    made = not out.exists()
    try:
        the_plan, builder = template_builder(problem, out / "candidates", arch=arch, policy=policy,
                                             families=families, backend=backend)
    except BaseException:
        if made:  # a run that never started leaves no empty folder behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    evaluator = evaluator or evaluator_for(problem, device, arch, policy)
    record = _RunRecord(Path(problem), arch=arch, device=device, policy=policy, budget_s=budget_s, out=out,
                        db_path=db_path)
    try:
        ranker = None
        if evaluator.timed:  # the cost model orders what a GPU times (costmodel/ranker.py; --no-model: not)
            from kernelwright.costmodel.ranker import search_ranker

            ranker = search_ranker(arch, enabled=use_model)
        result = _search(the_plan, builder, evaluator, progress, record, started=started, deadline=deadline,
                         out=out, arch=arch, device=device, policy=policy, verify_allowance_s=verify_allowance_s,
                         ranker=ranker, ptx_rewrites=ptx_rewrites)
    except BaseException as exc:
        record.fail(exc)
        raise
    record.finish(result)
    return result


def _search(the_plan: Plan, builder: CandidateBuilder, evaluator: Evaluator, progress: Progress,
            record: _RunRecord, *, started: float, deadline: Deadline, out: Path, arch: str, device: str,
            policy: Policy, verify_allowance_s: float = 0.0, ranker: Any = None,
            ptx_rewrites: bool = True) -> OptimizeResult:
    """Tune (on a GPU), verify the finalists fastest first, write the outputs; Ctrl-C still writes the best so far."""
    outcomes: dict[int, Outcome] = {}
    trials: tuple[RewriteTrial, ...] = ()
    dropped: set[int] = set()  # PTX rewrites timed and not kept: never finalists, never the best
    interrupted = False
    # The budget is a promise, verification included: tuning stops early enough for a verify, and every verify is
    # cut at the budget's end (a cut verify is a timeout verdict that names the budget).
    # With an allowance, the search has the whole budget and each verify the allowance beyond it.
    assert deadline.at is not None
    budget_s = deadline.at - started
    tuning_end = deadline.at
    if evaluator.timed and verify_allowance_s <= 0:
        reserve = float(getattr(evaluator, "verify_estimate_s", 0.0))
        tuning_end = min(started + 0.75 * budget_s, deadline.at - reserve)
    tuning = Deadline(max(tuning_end, started + 0.25 * budget_s))
    try:
        if evaluator.timed:
            stage = ptx_rewrites and ptx.available(evaluator)
            # With the PTX rewrite stage on, the coordinate descent leaves it the rest of the tuning time.
            default = _tune(builder, evaluator, tuning.share(ptx.TUNING_SHARE) if stage else tuning, progress,
                            outcomes, record, ranker)
            leader = _fastest(outcomes.values())
            if stage and leader is not None and not tuning.expired():
                trials = ptx.rewrite_stage(builder, evaluator, tuning, leader, outcomes, record, progress)
            dropped = {t.candidate for t in trials if not t.kept}
            finalists = sorted((o for o in outcomes.values() if o.median_ms is not None
                                and o.candidate.index not in dropped), key=lambda o: o.median_ms or 0.0)[:FINALISTS]
            if not finalists and default.index not in outcomes:
                # The budget ran out before the tuner timed anything (on the H200, 2026-12-02, four problems
                # sharing the GPU waited for it past a 30 s budget): the default candidate still gets the
                # verifier's protocol, which times it, rather than the run ending with nothing.
                finalists = [Outcome(candidate=default, status="built")]
        else:
            default = builder.build(tuple(0 for _ in builder.spaces), "default")
            finalists = [Outcome(candidate=default, status="built")]
            progress.built = builder.count
        for position, finalist in enumerate(finalists):
            # Fastest first; the first to pass the full protocol wins. Failing finalists never reach the
            # baselines (the verifier skips them), so torch.compile is timed once, for the winner.
            if position and deadline.expired():
                progress.note = "(budget spent before the next finalist)"
                break
            progress.note = f"(verifying c{finalist.candidate.index:03d})"
            progress.show(force=True)
            verdict = evaluator.verify(finalist.candidate, compile_baseline=evaluator.timed,
                                       deadline=deadline.not_before(time.monotonic()).extended(verify_allowance_s))
            outcomes[finalist.candidate.index] = replace(finalist, status=str(verdict.status), verdict=verdict)
            record.outcome(outcomes[finalist.candidate.index])
            progress.verified += 1
            progress.baseline_ms = verdict.median_ms("eager") or progress.baseline_ms
            # The line ends on the verdict, not on "(verifying ...)": the verified median replaces the tuner's.
            progress.best_ms = verdict.median_ms() or progress.best_ms
            progress.note = f"(c{finalist.candidate.index:03d} {verdict.status}" + (
                "; not timed: no GPU)" if not evaluator.timed else ")")
            if verdict.passed:
                break
    except KeyboardInterrupt:
        interrupted = True
        progress.note = "(interrupted: writing the best so far)"
    progress.done()
    best = _best(o for o in outcomes.values() if o.candidate.index not in dropped)
    result = OptimizeResult(problem=the_plan.graph.problem.path, out_dir=out, plan=the_plan,
                            outcomes=tuple(outcomes[i] for i in sorted(outcomes)), best=best,
                            timed=evaluator.timed, interrupted=interrupted, elapsed_s=time.monotonic() - started,
                            arch=arch, device=device, policy=policy, rewrites=trials)
    write_outputs(result)
    return result


def _fastest(outcomes: Iterable[Outcome]) -> Outcome | None:
    timed = [o for o in outcomes if o.median_ms is not None]
    return min(timed, key=lambda o: o.median_ms or 0.0) if timed else None


def _best(outcomes: Iterable[Outcome]) -> Outcome | None:
    """A verified pass beats everything; among passes the fastest; without any, the fastest timed candidate."""
    outcomes = list(outcomes)
    passed = [o for o in outcomes if o.verdict is not None and o.verdict.passed]
    if passed:
        return min(passed, key=lambda o: o.verdict.median_ms() or float("inf"))
    timed = [o for o in outcomes if o.median_ms is not None]
    if timed:
        return min(timed, key=lambda o: o.median_ms or 0.0)
    return outcomes[0] if outcomes else None
