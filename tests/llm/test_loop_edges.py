"""The closed loop at its edges: the wall budget against hanging calls and a queue of verifications, ``--resume`` of
candidates generated but never verified, Ctrl-C, the hybrid path's template mutations, and the verdict cache."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import test_loop
from fake_server import Reply
from stubs import StubEvaluator, kernel, make_verdict, reply_with
from test_loop import _run

from kernelwright.deadline import Deadline
from kernelwright.search.db import RunDB
from kernelwright.search.strategies import MUTATE, TEMPLATE, Request, make_strategy

workspace = test_loop.workspace  # the fixture: a problem file, a kernelwright.toml, no API keys


def test_a_call_still_running_at_the_deadline_is_abandoned_not_waited_for(workspace, fake_llm) -> None:
    server = fake_llm(lambda request, index: Reply(content=reply_with(kernel("passed", ms=1.0 + index)),
                                                   hang_s=0.2 if index == 0 else 300))
    started = time.monotonic()
    result = _run(workspace, server, budget_s=3.0)
    # not the 300 s the second call hangs (the bound is loose: a loaded machine may be slow, never 300 s slow)
    assert time.monotonic() - started < 120
    assert "wall-time budget" in result.stop_reason


def test_verifications_queued_at_the_deadline_are_left_for_resume(workspace, fake_llm) -> None:
    tmp, _ = workspace
    server = fake_llm(lambda request, index: Reply(content=reply_with(kernel("passed", ms=1.0 + index))))
    evaluator = StubEvaluator(delay_s=0.6)
    result = _run(workspace, server, budget_s=1.5, samples=6, evaluator=evaluator)
    # The budget, the verification running at the deadline and the winner's final one; not six queued ones. Counted,
    # not timed (a loaded machine finishes fewer in the budget, never more): starts at 0, 0.6 and 1.2 s, the final.
    assert len(evaluator.calls) <= 4, evaluator.calls
    with RunDB(tmp / "runs.sqlite") as db:
        left = [c for c in db.candidates(result.run_id) if c.verdict_id is None]
        db.finish_run(result.run_id, "interrupted", {})
    assert left
    evaluator2 = StubEvaluator()
    resumed = _run(workspace, fake_llm([]), resume=result.run_id, max_candidates=0, evaluator=evaluator2)
    verified = {e.candidate_id for e in resumed.entries if e.verdict is not None}
    assert {c.id for c in left} <= verified


def _killed_run(tmp, problem, rounds: list[tuple[str, float | None]], pending: int) -> int:
    """A refine run as a SIGKILL leaves it: lineage 0's rounds verified, then ``pending`` rounds never verified."""
    from kernelwright.verify.records import verdict_json

    with RunDB(tmp / "runs.sqlite") as db:
        run_id = db.start_run(db.add_problem(problem, problem.read_text()), generator="llm", strategy="refine",
                              settings={}, arch="sm_90a", toolchain="t", device="cpu")
        for r, (status, ms) in enumerate(rounds + [("passed", 1.5)] * pending):
            source = kernel(status, ms=ms, note=f"r{r}")
            cid, _ = db.add_candidate(run_id, source, origin="llm", lineage=0, round=r)
            if r < len(rounds):
                verdict = json.loads(verdict_json(make_verdict(status, ms, "", "s" * 64)))
                db.record_verdict(cid, verdict, arch="sm_90a", toolchain="t", options_key="k")
        db.finish_run(run_id, "interrupted", {})
    return run_id


def test_resume_verifies_a_pending_candidate_before_its_lineage_asks_again(workspace, fake_llm) -> None:
    tmp, problem = workspace
    run_id = _killed_run(tmp, problem, [("incorrect", None), ("passed", 2.0)], pending=1)
    server = fake_llm(lambda request, index: Reply(content=reply_with(kernel("passed", ms=3.0, note=f"n{index}")),
                                                   hang_s=0.5))
    result = _run(workspace, server, resume=run_id, max_candidates=2, evaluator=StubEvaluator(delay_s=0.3))
    assert server.max_concurrent == 1  # samples=1: the pending verification counted as the lineage's request
    entries = sorted(result.entries, key=lambda e: e.index)
    assert [e.index for e in entries] == [1, 2, 3, 4, 5]  # numbered after the replayed ones, none twice
    assert [e.round for e in entries] == [0, 1, 2, 3, 4]  # the pending round 2 is followed by round 3
    assert "ms=1.5" in json.dumps(server.requests[0]["messages"])  # the first new prompt heard about it
    assert [p["samples"] for p in result.scaling["by_samples"]] == [1, 2, 3, 4, 5]


def test_ctrl_c_during_the_winners_final_verification_keeps_the_best_and_writes_the_outputs(workspace,
                                                                                            fake_llm) -> None:
    class InterruptedAtTheEnd(StubEvaluator):
        def verify(self, candidate, *, compile_baseline: bool, deadline=None):
            if compile_baseline:
                raise KeyboardInterrupt
            return super().verify(candidate, compile_baseline=compile_baseline)

    tmp, _ = workspace
    fast = kernel("passed", ms=0.5)
    server = fake_llm([Reply(content=reply_with(fast))])
    result = _run(workspace, server, max_candidates=1, evaluator=InterruptedAtTheEnd())
    assert result.interrupted and result.best is not None and result.best.median_ms == 0.5
    assert (tmp / "run" / "best.py").read_text() == fast
    with RunDB(tmp / "runs.sqlite") as db:
        assert db.run(result.run_id).status == "interrupted"


def test_a_run_that_fails_is_marked_failed(workspace, fake_llm, monkeypatch) -> None:
    from kernelwright.search.llm_search import LLMSearch

    def broken(self, request):
        raise RuntimeError("a defect")

    monkeypatch.setattr(LLMSearch, "messages_for", broken)
    tmp, _ = workspace
    with pytest.raises(RuntimeError):
        _run(workspace, fake_llm([]), max_candidates=1)
    with RunDB(tmp / "runs.sqlite") as db:
        run = db.runs()[0]
        assert run.status == "failed"
        assert "a defect" in db.run(run.id).summary["stop_reason"]


def test_a_problem_file_with_crlf_line_ends_still_hits_the_verdict_cache(workspace, fake_llm) -> None:
    tmp, problem = workspace
    problem.write_bytes(problem.read_text().replace("\n", "\r\n").encode())
    same = reply_with(kernel("passed", ms=1.0))
    _run(workspace, fake_llm(lambda request, index: Reply(content=same)), max_candidates=1)
    evaluator = StubEvaluator()
    _run(workspace, fake_llm(lambda request, index: Reply(content=same)), max_candidates=1, evaluator=evaluator)
    assert [c for _, c in evaluator.calls].count(False) == 0


# -- hybrid ---------------------------------------------------------------------------------------------------------
class _TemplatesPass(StubEvaluator):
    """No GPU; a file without the stub marker (a template's kernel) passes."""

    timed = False

    def verify(self, candidate, *, compile_baseline: bool, deadline=None):
        from stubs import MARK

        if MARK.search(Path(candidate.path).read_text()):
            return super().verify(candidate, compile_baseline=compile_baseline)
        self.calls.append(("template", compile_baseline))
        return make_verdict("passed", 2.0, "", "t" * 64)


def _seeded(tmp, problem, evaluator):
    from kernelwright.generate.families.base import DEFAULT_POLICY
    from kernelwright.search.template_seed import seed_from_templates

    db = RunDB(tmp / "runs.sqlite")
    run_id = db.start_run(db.add_problem(problem, problem.read_text()), generator="hybrid", strategy="evolve",
                          settings={}, arch="sm_90a", toolchain="t", device="cpu")
    strategy = make_strategy("evolve", 1)
    builder = seed_from_templates(problem, tmp / "run", Deadline.after(60), "cpu", "sm_90a", DEFAULT_POLICY,
                                   evaluator, db, run_id, strategy)
    return db, run_id, strategy, builder


def test_template_mutations_do_not_overwrite_the_template_searchs_kernels_nor_rebuild_them(workspace) -> None:
    from kernelwright.search.llm_search import LLMSearch

    tmp, problem = workspace
    db, run_id, strategy, builder = _seeded(tmp, problem, _TemplatesPass())
    try:
        (seed,) = strategy.seeds
        template_files = {p: p.read_text() for p in (tmp / "run" / "templates" / "candidates").glob("*.py")}
        assert template_files and seed.template_choice is not None
        search = LLMSearch(problem=problem, out_dir=tmp / "run", strategy=strategy, client=None, evaluator=None,
                           db=db, run_id=run_id, budget=None, context=None, device="cpu", options_key="k",
                           toolchain="t", template_builder=builder)
        built = [search._template_mutation(Request(lineage=i, round=0, kind=TEMPLATE, parents=(seed,)))
                 for i in range(sum(len(s) for s in builder.spaces))]
        made = [e for e in built if e is not None]
        assert made and all(e.template_choice != seed.template_choice for e in made)
        assert len({e.template_choice for e in made}) == len(made)  # each configuration once
        assert {p: p.read_text() for p in template_files} == template_files  # the template search's files intact
        assert seed.source == Path(seed.path).read_text()
        assert db.candidate(made[0].candidate_id).meta == {"template_choice": list(made[0].template_choice)}
    finally:
        db.close()


def test_a_cost_model_picks_the_template_mutations_configuration(workspace) -> None:
    """With a ranker (the cost model), a template mutation tries the mutated group's configuration the model ranks
    first among those not yet tried — here always the last one of the space — except for an explorer share."""
    from kernelwright.search.llm_search import LLMSearch

    class LastFirst:
        def __init__(self) -> None:
            self.asked: list[tuple[int, str]] = []

        def best_first(self, sources, family):
            self.asked.append((len(sources), family))
            assert all("class ModelNew" in source for source in sources)  # rendered, not built
            return list(reversed(range(len(sources))))

    tmp, problem = workspace
    db, run_id, strategy, builder = _seeded(tmp, problem, _TemplatesPass())
    try:
        (seed,) = strategy.seeds
        ranker = LastFirst()
        search = LLMSearch(problem=problem, out_dir=tmp / "run", strategy=strategy, client=None, evaluator=None,
                           db=db, run_id=run_id, budget=None, context=None, device="cpu", options_key="k",
                           toolchain="t", template_builder=builder, ranker=ranker)
        search._rng.random = lambda: 1.0  # never the explorer
        before, built = builder.count, set(builder.by_choice)
        entry = search._template_mutation(Request(lineage=0, round=0, kind=TEMPLATE, parents=(seed,)))
        assert entry is not None and builder.count == before + 1  # only the chosen one was built
        (g,) = [g for g, (a, b) in enumerate(zip(entry.template_choice, seed.template_choice)) if a != b]

        def at(i: int) -> tuple[int, ...]:
            return tuple(i if h == g else c for h, c in enumerate(seed.template_choice))

        untried = [i for i in range(len(builder.spaces[g])) if i != seed.template_choice[g] and at(i) not in built]
        assert entry.template_choice[g] == max(untried)
        assert ranker.asked == [(len(untried), builder.plan.groups[g].family)]
        search._rng.random = lambda: 0.0  # an explorer: the configuration is drawn, the model not asked
        assert search._template_mutation(Request(lineage=0, round=0, kind=TEMPLATE, parents=(seed,))) is not None
        assert len(ranker.asked) == 1 and builder.count == before + 2
    finally:
        db.close()


def test_an_exhausted_template_neighbourhood_becomes_an_llm_mutation(workspace) -> None:
    from kernelwright.search.llm_search import LLMSearch

    class Client:
        def __init__(self) -> None:
            self.tags: list[str] = []

        def submit(self, messages, *, tag, deadline=None):
            self.tags.append(tag)
            return object()

    tmp, problem = workspace
    db, run_id, strategy, builder = _seeded(tmp, problem, _TemplatesPass())
    try:
        (seed,) = strategy.seeds
        for space_index, space in enumerate(builder.spaces):  # every neighbour tried already
            for i in range(len(space)):
                choice = list(seed.template_choice)
                choice[space_index] = i
                builder.by_choice.setdefault(tuple(choice), None)
        client = Client()
        search = LLMSearch(problem=problem, out_dir=tmp / "run", strategy=strategy, client=client, evaluator=None,
                           db=db, run_id=run_id, budget=None, context=None, device="cpu", options_key="k",
                           toolchain="t", template_builder=builder)
        search.messages_for = lambda request: [{"role": "user", "content": request.kind}]
        in_flight: dict = {}
        search._start(Request(lineage=3, round=0, kind=TEMPLATE, parents=(seed,)), in_flight, None)
        ((kind, request, _),) = in_flight.values()
        assert kind == "generate" and request.kind == MUTATE and request.parents == (seed,)
        assert not strategy.entries  # no empty answer recorded for it
    finally:
        db.close()


def test_ctrl_c_in_the_template_phase_ends_a_hybrid_run(workspace, fake_llm) -> None:
    class Interrupting(_TemplatesPass):
        def verify(self, candidate, *, compile_baseline: bool, deadline=None):
            raise KeyboardInterrupt

    tmp, _ = workspace
    server = fake_llm([])
    with pytest.raises(KeyboardInterrupt):
        _run(workspace, server, generator="hybrid", strategy="evolve", evaluator=Interrupting())
    assert server.requests == []  # the LLM phase never started
    with RunDB(tmp / "runs.sqlite") as db:
        assert db.runs()[0].status == "interrupted"


def test_a_hybrid_run_seeds_from_the_templates_and_resumes_with_its_template_parents(workspace, fake_llm) -> None:
    tmp, _ = workspace
    server = fake_llm(lambda request, index: Reply(content=reply_with(kernel("passed", ms=1.0, note=f"n{index}"))))
    result = _run(workspace, server, generator="hybrid", strategy="evolve", max_candidates=3, seed=1,
                  evaluator=_TemplatesPass())
    assert result.best is not None
    with RunDB(tmp / "runs.sqlite") as db:
        rows = db.candidates(result.run_id)
        db.finish_run(result.run_id, "interrupted", {})
    (seed_row,) = [r for r in rows if r.origin == "seed"]
    assert seed_row.meta and "template_choice" in seed_row.meta
    resumed = _run(workspace, fake_llm(lambda request, index: Reply(content="no code")), generator="hybrid",
                   strategy="evolve", max_candidates=1, resume=result.run_id, evaluator=_TemplatesPass())
    assert resumed.best is not None and (tmp / "run" / "templates" / "mutations").is_dir()


def test_every_call_failing_fast_ends_the_run_and_a_key_in_the_url_is_not_stored(workspace) -> None:
    from kernelwright.search.llm_search import optimize_with_llm

    tmp, problem = workspace
    started = time.monotonic()
    result = optimize_with_llm(problem, out_dir=tmp / "run", base_url="http://user:sk-secret@127.0.0.1:9/v1",
                               db_path=tmp / "runs.sqlite", device="cpu", budget_s=60, samples=2,
                               evaluator=StubEvaluator())
    assert time.monotonic() - started < 30 and "the LLM calls fail" in result.stop_reason
    with RunDB(tmp / "runs.sqlite") as db:
        run = db.run(result.run_id)
        assert "sk-secret" not in json.dumps(run.settings) and run.status == "finished"


def test_a_template_seed_that_stays_the_best_is_not_verified_a_third_time(workspace) -> None:
    from kernelwright.search.llm_search import LLMSearch
    from kernelwright.search.strategies import Entry

    tmp, problem = workspace
    evaluator = StubEvaluator()
    search = LLMSearch(problem=problem, out_dir=tmp / "run", strategy=make_strategy("evolve", 1), client=None,
                       evaluator=evaluator, db=None, run_id=1, budget=None, context=None, device="cuda",
                       options_key="k", toolchain="t")
    seed = Entry(index=0, lineage=-1, round=0, origin="seed", source="s", path=str(problem),
                 verdict=make_verdict("passed", 1.0, "", "s" * 64, compile_baseline=True))
    assert search._final(seed) is seed and evaluator.calls == []


def test_no_openai_package_ends_the_run_at_the_first_call_and_says_how_to_install_it(workspace,
                                                                                   monkeypatch) -> None:
    import importlib

    from kernelwright.search.llm_search import optimize_with_llm

    real = importlib.import_module

    def without_openai(name: str, *args, **kwargs):
        if name == "openai":
            raise ImportError("No module named 'openai'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", without_openai)
    tmp, problem = workspace
    result = optimize_with_llm(problem, out_dir=tmp / "run", base_url="http://127.0.0.1:9/v1",
                               db_path=tmp / "runs.sqlite", device="cpu", budget_s=60, samples=1,
                               max_candidates=4, evaluator=StubEvaluator())
    assert "the LLM calls fail" in result.stop_reason and "pip install 'kernelwright[llm]'" in result.stop_reason
    assert len(result.entries) == 1  # one call told the whole story


def test_the_winners_final_verify_keeps_to_the_budget_and_its_allowance(workspace) -> None:
    """With the budget spent and no allowance, the winner keeps its verdict (no verify past the budget); with an
    allowance (a bench's --verify-limit), the final verify runs, cut at the budget's end plus the allowance."""
    import io

    from kernelwright.search.llm_search import Budget, LLMSearch
    from kernelwright.search.progress import Progress
    from kernelwright.search.strategies import Entry

    tmp, problem = workspace
    winner = Entry(index=0, lineage=0, round=1, origin="llm", source=kernel("passed", ms=0.5), path=str(problem),
                   candidate_id=None, verdict=make_verdict("passed", 0.5, "", "w" * 64))
    for allowance, verified in ((0.0, False), (120.0, True)):
        evaluator = StubEvaluator()
        search = LLMSearch(problem=problem, out_dir=tmp / "run", strategy=make_strategy("evolve", 1), client=None,
                           evaluator=evaluator, db=None, run_id=1, context=None, device="cuda", options_key="k",
                           toolchain="t", budget=Budget(wall_s=10.0, verify_allowance_s=allowance),
                           progress=Progress(stream=io.StringIO(), llm=True))
        search._deadline = Deadline(time.monotonic() - 1.0)  # the wall budget ended a second ago
        search._final(winner)
        assert [c for _, c in evaluator.calls] == ([True] if verified else []), allowance
