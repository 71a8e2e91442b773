"""The closed loop (issue 6) against our fake OpenAI-compatible server, through the real `openai` client over HTTP.

Most tests verify with a stub evaluator that reads each candidate's verdict from a marker (fast, and it can
"time" kernels on a CPU machine); ``test_the_real_verifier_judges_what_the_model_writes`` runs the real verifier
under the Triton interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_server import Reply
from stubs import StubEvaluator, kernel, reply_with

from kernelwright.search.db import RunDB
from kernelwright.search.llm_search import optimize_with_llm

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = """
import torch
import torch.nn as nn

n = 4096


class Model(nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A problem file, a kernelwright.toml with fast retries, and no API keys in the environment."""
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "KERNELWRIGHT_LLM_MODEL", "KERNELWRIGHT_LLM_BASE_URL",
                 "KERNELWRIGHT_LLM_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernelwright.toml").write_text("[llm]\nmodel = 'fake-r1'\ntimeout_s = 5\nbackoff_s = 0.01\n"
                                                "max_retries = 2\n")
    problem = tmp_path / "vector_add.py"
    problem.write_text(PROBLEM)
    return tmp_path, problem


def _run(workspace, server, **kw):
    tmp, problem = workspace
    kw.setdefault("evaluator", StubEvaluator())
    kw.setdefault("budget_s", 60)
    kw.setdefault("samples", 1)
    return optimize_with_llm(problem, out_dir=tmp / "run", base_url=server.base_url, db_path=tmp / "runs.sqlite",
                             device="cpu", **kw)


def _user(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def test_refine_feeds_every_failure_back_and_ends_with_the_fast_kernel(workspace, fake_llm) -> None:
    slow, fast = kernel("passed", ms=2.0), kernel("passed", ms=0.5, body="return x + x")
    server = fake_llm([
        Reply(content="I would tile the loads and use shared memory.", reasoning="THOUGHT-0 private"),
        Reply(content=reply_with("class ModelNew(nn.Module:\n    pass\n")),
        Reply(content=reply_with(kernel("incorrect"))),
        Reply(content=reply_with(kernel("rejected", note="output-caching: trial 5 returned trial 0's output"))),
        Reply(content=reply_with(slow), reasoning="THOUGHT-4 private"),
        Reply(content=reply_with(fast)),
    ])
    result = _run(workspace, server, strategy="refine", max_candidates=6)

    prompts = [_user(r) for r in server.requests]
    assert len(prompts) == 6
    assert "ModelNew" in prompts[1] and "code block" in prompts[1]  # the prose answer, fed back
    assert "line" in prompts[2].lower() and "syntax" in prompts[2].lower()  # the syntax error, with its line
    assert "3.0" in prompts[3] and "[1, 2]" in prompts[3]  # mismatch statistics with the worst index
    assert "output-caching" in prompts[4]  # the integrity finding
    assert "ms=2.0" in prompts[5]  # the best kernel so far is shown in full
    assert not any("THOUGHT" in json.dumps(r["messages"]) for r in server.requests)  # reasoning never sent back

    assert result.best is not None and result.best.median_ms == 0.5 and result.best.source == fast
    statuses = [str(e.verdict.status) if e.verdict else "no code" for e in sorted(result.entries,
                                                                                  key=lambda e: e.index)]
    assert statuses == ["no code", "no code", "incorrect", "rejected", "passed", "passed"]
    out = workspace[0] / "run"
    assert (out / "best.py").read_text() == fast
    verdict = json.loads((out / "verdict.json").read_text())
    curve = verdict["search"]["scaling"]["by_samples"]
    assert [p["correct"] for p in curve] == [0, 0, 0, 0, 1, 2]
    assert curve[-1]["best_speedup_vs_eager"] == pytest.approx(2.0)
    assert "Inference-time scaling" in (out / "report.md").read_text()
    with RunDB(workspace[0] / "runs.sqlite") as db:
        usage = db.llm_usage(result.run_id)
        assert usage["calls"] == 6
        assert db.run(result.run_id).status == "finished"
        assert len(db.candidates(result.run_id)) == 4  # the four responses that held code


def test_transient_http_errors_are_retried_and_a_hang_is_a_failure_fed_back(workspace, fake_llm) -> None:
    tmp, _ = workspace
    (tmp / "kernelwright.toml").write_text("[llm]\ntimeout_s = 0.5\nbackoff_s = 0.01\nmax_retries = 1\n")
    server = fake_llm([
        Reply(status=429, retry_after=0.01), Reply(content=reply_with(kernel("passed", ms=1.0))),  # call 1
        Reply(hang_s=3), Reply(hang_s=3),  # call 2: timeout, retried once, fails
        Reply(status=500), Reply(content=reply_with(kernel("passed", ms=0.25))),  # call 3
    ])
    result = _run(workspace, server, max_candidates=3)
    entries = sorted(result.entries, key=lambda e: e.index)
    assert entries[0].passed and entries[2].passed
    assert entries[1].failure and "LLM call failed" in entries[1].failure
    assert "LLM call failed" in _user(server.requests[-1])  # the failed call was the lineage's last attempt
    assert result.best.median_ms == 0.25
    assert result.usage["failures"] == 1 and result.usage["calls"] == 3


def test_budgets_end_the_run(workspace, fake_llm) -> None:
    def passing(request, index):
        return Reply(content=reply_with(kernel("passed", ms=1.0 + index)), prompt_tokens=3000, completion_tokens=1000)

    server = fake_llm(passing)
    result = _run(workspace, server, max_tokens=10_000)
    assert len(server.requests) == 3 and "token budget" in result.stop_reason

    server = fake_llm(passing)
    result = _run(workspace, server, samples=4, max_candidates=2)
    assert len(server.requests) == 2 and "candidate budget" in result.stop_reason

    def slow(request, index):
        return Reply(content=reply_with(kernel("passed", ms=1.0 + index)), hang_s=0.4)

    server = fake_llm(slow)
    started = time.monotonic()
    result = _run(workspace, server, samples=2, budget_s=2.0)
    # Nothing else would stop it (no candidate or token budget): the wall-time budget did, after a few calls of
    # 0.4 s; the bounds are loose, so a loaded machine does not fail them.
    assert time.monotonic() - started < 60 and "wall-time budget" in result.stop_reason
    assert 2 <= len(server.requests) <= 12


def test_best_of_n_samples_are_independent_and_evolve_breeds_from_verified_parents(workspace, fake_llm) -> None:
    def passing(request, index):
        return Reply(content=reply_with(kernel("passed", ms=round(1.0 + (index * 7919 % 13) / 10, 2))))

    server = fake_llm(passing)
    _run(workspace, server, strategy="best-of-n", samples=3, max_candidates=6)
    assert len({_user(r) for r in server.requests}) == 1  # the same first prompt: independent samples

    server = fake_llm(passing)
    result = _run(workspace, server, strategy="evolve", samples=2, max_candidates=10, seed=3)
    origins = {e.origin for e in result.entries}
    assert "llm" in origins and origins & {"mutation", "crossover"}
    bred = [e for e in result.entries if e.origin in ("mutation", "crossover")]
    assert all(e.parents for e in bred)  # every child names its verified parent(s)


def test_a_verified_kernel_is_not_verified_again(workspace, fake_llm) -> None:
    same = reply_with(kernel("passed", ms=1.0))
    evaluator = StubEvaluator()
    server = fake_llm(lambda request, index: Reply(content=same))
    _run(workspace, server, max_candidates=3, evaluator=evaluator)
    assert [c for _, c in evaluator.calls].count(False) == 1  # once in the loop (the winner's re-check has baselines)
    evaluator2 = StubEvaluator()
    _run(workspace, fake_llm(lambda request, index: Reply(content=same)), max_candidates=2, evaluator=evaluator2)
    assert [c for _, c in evaluator2.calls].count(False) == 0  # a new run, the database's verdict


def test_a_run_killed_with_sigkill_resumes_without_losing_a_finished_result(workspace, fake_llm) -> None:
    tmp, problem = workspace
    server = fake_llm(lambda request, index: Reply(content=reply_with(kernel("passed", ms=round(2.0 / (index + 1), 4),
                                                                             note=f"v{index}"))))
    log = tmp / "verified.log"
    child = textwrap_child(problem, tmp, server.base_url, log)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen([sys.executable, "-c", child], cwd=tmp, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not log.exists() or len(log.read_text().split()) < 3):
            assert proc.poll() is None, "the child ended before it could be killed"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    before = set(log.read_text().split())
    assert len(before) >= 3
    with RunDB(tmp / "runs.sqlite") as db:
        run_id = db.runs()[0].id
        assert db.runs()[0].status == "interrupted"
        verified_before = [c for c in db.candidates(run_id) if c.verdict_id is not None]
    assert len(verified_before) >= 2  # results that finished before the kill are in the database

    evaluator = StubEvaluator()
    result = _run(workspace, server, resume=run_id, max_candidates=2, evaluator=evaluator)
    again = {sha for sha, baseline in evaluator.calls if not baseline}
    assert not again & {c.sha256 for c in verified_before}  # nothing finished was verified twice
    kept = {e.candidate_id for e in result.entries if e.verdict is not None}
    assert {c.id for c in verified_before} <= kept  # and every finished result is part of the resumed run
    with RunDB(tmp / "runs.sqlite") as db:
        assert db.run(run_id).status == "finished"


def textwrap_child(problem: Path, tmp: Path, base_url: str, log: Path) -> str:
    return (
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT / 'src')!r}, {str(Path(__file__).parent)!r}]\n"
        "from stubs import StubEvaluator\n"
        "from kernelwright.search.llm_search import optimize_with_llm\n"
        f"optimize_with_llm({str(problem)!r}, out_dir={str(tmp / 'run')!r}, budget_s=120, samples=1,\n"
        f"    base_url={base_url!r}, db_path={str(tmp / 'runs.sqlite')!r}, device='cpu', max_candidates=50,\n"
        f"    evaluator=StubEvaluator(log=__import__('pathlib').Path({str(log)!r}), delay_s=0.2))\n"
    )


def test_no_key_and_no_server_is_one_line_saying_how_to_configure(workspace, capsys) -> None:
    from kernelwright.cli import main

    tmp, problem = workspace
    (tmp / "kernelwright.toml").unlink()
    code = main(["optimize", str(problem), "--generator", "llm", "--out", str(tmp / "x"), "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "DEEPSEEK_API_KEY" in err and "--generator templates" in err


def test_the_real_verifier_judges_what_the_model_writes(workspace, fake_llm) -> None:
    """Real Triton kernels, verified in the isolated child under the interpreter: a wrong kernel is incorrect, a
    library-only "kernel" is rejected, an honest one passes — and each verdict reaches the next prompt."""
    from kernelwright.search.evaluate import CpuEvaluator

    honest = (ROOT / "examples" / "vector_add_triton.py").read_text()
    wrong = honest.replace("tl.store(out_ptr + offs, a + b, mask=mask)", "tl.store(out_ptr + offs, a - b, mask=mask)")
    assert wrong != honest
    library = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
               "    def forward(self, a, b):\n        return torch.add(a, b)\n")
    server = fake_llm([Reply(content=reply_with(wrong)), Reply(content=reply_with(library)),
                       Reply(content=reply_with(honest))])
    tmp, problem = workspace
    # max_candidates ends it; the wall-time budget is far away (three real verifies took over 60 s on a loaded
    # 2-core machine)
    result = _run(workspace, server, max_candidates=3, evaluator=CpuEvaluator(problem, arch="sm_90a"), budget_s=1800)
    statuses = [str(e.verdict.status) for e in sorted(result.entries, key=lambda e: e.index)]
    assert statuses == ["incorrect", "rejected", "passed"]
    prompts = [_user(r) for r in server.requests]
    assert "incorrect" in prompts[1].lower() or "mismatch" in prompts[1].lower()
    assert "no-own-kernel" in prompts[2]
    assert result.best is not None and result.best.source == honest


def test_resume_refuses_other_settings(workspace, fake_llm) -> None:
    from kernelwright.errors import InputError
    from kernelwright.generate.families.base import Policy

    server = fake_llm(lambda request, index: Reply(content=reply_with(kernel("passed", ms=1.0 + index))))
    result = _run(workspace, server, max_candidates=1)
    for change in ({"strategy": "evolve"}, {"policy": Policy(allow_tf32=True)}):
        with pytest.raises(InputError, match="other settings"):
            _run(workspace, server, resume=result.run_id, max_candidates=1, **change)


def test_parallel_calls_do_not_overshoot_the_token_budget_by_a_round(workspace, fake_llm) -> None:
    def passing(request, index):
        return Reply(content=reply_with(kernel("passed", ms=1.0 + index)), prompt_tokens=3000, completion_tokens=1000,
                     hang_s=0.05 * (index % 2))

    server = fake_llm(passing)
    result = _run(workspace, server, samples=2, max_tokens=10_000)
    assert "token budget" in result.stop_reason
    assert len(server.requests) <= 3  # not 4: the calls in flight count at the mean cost so far


def test_a_transient_verdict_is_verified_again(workspace, fake_llm) -> None:
    crashed = reply_with(kernel("crashed", note="the child died"))
    _run(workspace, fake_llm(lambda request, index: Reply(content=crashed)), max_candidates=1)
    evaluator = StubEvaluator()
    _run(workspace, fake_llm(lambda request, index: Reply(content=crashed)), max_candidates=1, evaluator=evaluator)
    assert len(evaluator.calls) == 1  # a crash says more about the moment than the kernel: not taken from the cache


def test_resume_restores_calls_that_gave_no_candidate(workspace, fake_llm) -> None:
    """A response without code is not a candidate, but it is a sample and its lineage's last feedback: a resumed
    run gets it back from the stored call (re-parsed for the same reason)."""
    server = fake_llm([Reply(content="Tile it in shared memory."), Reply(content=reply_with(kernel("passed", ms=1.0))),
                       Reply(content=reply_with(kernel("passed", ms=0.5, body="return x + x")))])
    first = _run(workspace, server, max_candidates=2)
    with RunDB(workspace[0] / "runs.sqlite") as db:
        db.finish_run(first.run_id, "interrupted", {})  # as if the process had been killed here
    result = _run(workspace, server, resume=first.run_id, max_candidates=1)
    entries = sorted(result.entries, key=lambda e: e.index)
    assert [e.index for e in entries] == [1, 2, 3]
    assert entries[0].failure and "code block" in entries[0].failure and entries[0].round == 0
    assert [e.round for e in entries] == [0, 1, 2]  # the lineage went on from its third round
    assert len(result.scaling["by_samples"]) == 3 and result.best.median_ms == 0.5


@pytest.mark.slow
def test_bench_with_the_llm_generator_scores_what_the_model_wrote(workspace, fake_llm) -> None:
    """``kernelwright bench --generator llm``: the loop runs per problem and the row carries its winner's verdict."""
    import json

    from kernelwright.cli import main

    honest = (ROOT / "examples" / "vector_add_triton.py").read_text()
    server = fake_llm([Reply(content=reply_with(honest))])
    tmp, problem = workspace
    out = tmp / "bench"
    assert main(["bench", str(problem), "--generator", "llm", "--base-url", server.base_url, "--samples", "1",
                 "--max-candidates", "1", "--device", "cpu", "--out", str(out), "--db", str(tmp / "runs.sqlite"),
                 "--budget-per-problem", "2m"]) == 0
    (row,) = json.loads((out / "results.json").read_text())["problems"]
    assert row["status"] == "passed" and row["families"] == ["llm"], row
    assert (out / "vector_add" / "best.py").read_text() == honest
    assert len(server.requests) == 1
