"""The run database: round trips, dedupe, the verdict cache, WAL, threads, and a writer killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelwright.errors import InputError
from kernelwright.search.db import SCHEMA_VERSION, RunDB, options_key, source_sha256

SRC = Path(__file__).resolve().parents[2] / "src"
PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    pass\n"


def _verdict(status: str = "passed", ms: float | None = 0.5, speedup: float | None = 2.0) -> dict:
    return {"status": status, "message": "ok", "timing": {"candidate": {"median_ms": ms} if ms else None},
            "speedups": {"vs_eager": speedup} if speedup else {}}


def _start(db: RunDB, source: str = PROBLEM, **overrides: object) -> tuple[int, int]:
    problem = db.add_problem("problems/relu.py", source)
    settings = dict(generator="llm", strategy="evolutionary", settings={"budget_s": 60}, arch="sm_90a",
                    toolchain="tc-1", device="NVIDIA H200") | overrides
    return problem, db.start_run(problem, **settings)


KEY = dict(arch="sm_90a", toolchain="tc-1", options_key="opts-1")


def test_round_trip(tmp_path: Path) -> None:
    with RunDB(tmp_path / "deep" / "er" / "runs.sqlite") as db:
        problem, run = _start(db)
        assert db.add_problem("elsewhere.py", PROBLEM) == problem  # by content
        call = db.record_llm_call(run, tag="seed", model="deepseek-reasoner", base_url="https://api.example/v1",
                                  messages=[{"role": "user", "content": "write a kernel"}], response_text="```py```",
                                  reasoning_text="think", prompt_tokens=1200, completion_tokens=300, cost_usd=0.002,
                                  latency_s=4.5, attempts=2, error=None)
        db.record_llm_call(run, tag="mutate", model="deepseek-reasoner", base_url=None, messages=[],
                           response_text=None, reasoning_text=None, prompt_tokens=None, completion_tokens=None,
                           cost_usd=None, latency_s=30.0, attempts=3, error="timeout")
        seed, _ = db.add_candidate(run, "seed source", origin="llm", llm_call_id=call, meta={"label": "s"})
        child, _ = db.add_candidate(run, "child source", origin="crossover", parent_id=seed, parent2_id=seed,
                                    lineage=1, round=2)
        db.update_candidate(child, status="compile_error", error="ptxas: too many resources")
        verdict_id = db.record_verdict(seed, _verdict(ms=0.25, speedup=3.0), **KEY)
        db.set_summary(run, {"curve": [{"n": 1, "best_ms": 0.25}]})

        row = db.run(run)
        assert (row.status, row.generator, row.settings, row.problem_name) == ("running", "llm", {"budget_s": 60},
                                                                             "relu")
        assert row.pid == os.getpid() and row.summary == {"curve": [{"n": 1, "best_ms": 0.25}]}
        db.finish_run(run, "finished", {"best": seed})
        assert db.run(run).status == "finished" and db.run(run).finished is not None

        first, second = db.candidates(run)
        assert (first.id, first.status, first.median_ms, first.verdict_id, first.speedup_eager) == (
            seed, "passed", 0.25, verdict_id, 3.0)
        assert first.llm_call_id == call and first.meta == {"label": "s"} and first.sha256 == source_sha256(
            "seed source")
        assert (second.origin, second.parent_id, second.parent2_id, second.lineage, second.round) == (
            "crossover", seed, seed, 1, 2)
        assert (second.status, second.error, second.verdict_id) == ("compile_error", "ptxas: too many resources",
                                                                     None)
        assert db.verdict(verdict_id)["speedups"] == {"vs_eager": 3.0}

        usage = db.llm_usage(run)
        assert usage == {"calls": 2, "failures": 1, "prompt_tokens": 1200, "completion_tokens": 300,
                         "tokens": 1500, "cost_usd": 0.002, "latency_s": 34.5}
        (summary,) = db.runs()
        assert (summary.candidates, summary.passed, summary.best_ms, summary.best_speedup) == (2, 1, 0.25, 3.0)
        assert (summary.llm_calls, summary.tokens, summary.cost_usd, summary.status) == (2, 1500, 0.002, "finished")


def test_candidates_dedupe_within_a_run_not_across(tmp_path: Path) -> None:
    with RunDB(tmp_path / "runs.sqlite") as db:
        problem, run = _start(db)
        first, new = db.add_candidate(run, "same", origin="llm")
        again, new_again = db.add_candidate(run, "same", origin="mutation", round=3)
        assert (new, new_again, again) == (True, False, first)
        other_run = db.start_run(problem, generator="templates", strategy="best-of-n", settings={}, arch="sm_90a",
                                 toolchain="tc-1", device="cpu")
        elsewhere, new_elsewhere = db.add_candidate(other_run, "same", origin="template")
        assert new_elsewhere and elsewhere != first
        assert [c.origin for c in db.candidates(run)] == ["llm"]


def test_verdict_cache_is_shared_across_runs_and_keyed(tmp_path: Path) -> None:
    with RunDB(tmp_path / "runs.sqlite") as db:
        problem, run = _start(db)
        cid, _ = db.add_candidate(run, "kernel", origin="llm")
        db.record_verdict(cid, _verdict(ms=1.5), **KEY)
        problem_sha, cand_sha = source_sha256(PROBLEM), source_sha256("kernel")

        assert db.cached_verdict(problem_sha, cand_sha, **KEY)["timing"]["candidate"]["median_ms"] == 1.5
        for changed in ({"arch": "sm_80"}, {"toolchain": "tc-2"}, {"options_key": "opts-2"}):
            assert db.cached_verdict(problem_sha, cand_sha, **(KEY | changed)) is None, changed
        assert db.cached_verdict(source_sha256("another problem"), cand_sha, **KEY) is None

        # A later run of the same problem hits the cache and links the same verdict to its own candidate.
        later = db.start_run(problem, generator="llm", strategy="best-of-n", settings={}, arch="sm_90a",
                             toolchain="tc-1", device="NVIDIA H200")
        again, _ = db.add_candidate(later, "kernel", origin="llm")
        hit = db.cached_verdict(problem_sha, cand_sha, **KEY)
        assert db.record_verdict(again, hit, **KEY) == db.candidates(run)[0].verdict_id
        assert db.candidates(later)[0].median_ms == 1.5

        # The same candidate on another problem is verified on its own.
        _, other = _start(db, source=PROBLEM + "# v2\n")
        there, _ = db.add_candidate(other, "kernel", origin="llm")
        assert db.record_verdict(there, _verdict(status="incorrect", ms=None), **KEY) != hit
        assert db.cached_verdict(problem_sha, cand_sha, **KEY)["status"] == "passed"


def test_options_key_is_stable_and_discriminates() -> None:
    assert options_key({"trials": 5, "tolerance": "reference"}) == options_key({"tolerance": "reference",
                                                                                 "trials": 5})
    assert options_key({"trials": 5}) != options_key({"trials": 6})


def test_wal_foreign_keys_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunDB(path) as db, pytest.raises(sqlite3.IntegrityError):
        db.add_candidate(999, "orphan", origin="llm")
    plain = sqlite3.connect(path)
    assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert plain.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    plain.execute("PRAGMA user_version = 99")
    plain.commit()
    plain.close()
    with pytest.raises(InputError, match="newer kernelwright"):
        RunDB(path)


def test_a_file_that_is_not_a_database_is_an_input_error(tmp_path: Path) -> None:
    junk = tmp_path / "runs.sqlite"
    junk.write_text("not sqlite at all " * 100)
    with pytest.raises(InputError, match="not a kernelwright run database"):
        RunDB(junk)
    with pytest.raises(InputError, match="no runs yet"):
        RunDB(tmp_path / "missing.sqlite", create=False)


def test_llm_call_never_keeps_credentials_in_the_url(tmp_path: Path) -> None:
    with RunDB(tmp_path / "runs.sqlite") as db:
        _, run = _start(db)
        db.record_llm_call(run, tag="t", model="m", base_url="https://user:sk-secret@host/v1?api_key=sk-x&v=2",
                           messages=[], response_text="", reasoning_text=None, prompt_tokens=1, completion_tokens=1,
                           cost_usd=None, latency_s=1.0, attempts=1, error=None)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("runs.sqlite*"))  # the file and any WAL left
    assert b"sk-secret" not in raw and b"sk-x" not in raw and b"https://host/v1?v=2" in raw


def test_unknown_and_finished_runs_cannot_be_resumed(tmp_path: Path) -> None:
    with RunDB(tmp_path / "runs.sqlite") as db:
        _, run = _start(db)
        with pytest.raises(InputError, match=rf"no run 77 .*newest: {run}"):
            db.resume_run(77)
        db.finish_run(run, "finished", {})
        with pytest.raises(InputError, match="finished"):
            db.resume_run(run)


def test_several_threads_and_connections_add_candidates(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    first, second = RunDB(path), RunDB(path)
    _, run = _start(first)
    sources = [f"kernel {i}" for i in range(60)]
    results: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def work(db: RunDB, offset: int) -> None:
        try:
            for i in range(len(sources)):
                cid, new = db.add_candidate(run, sources[(i + offset) % len(sources)], origin="llm")
                db.record_verdict(cid, _verdict(ms=1.0 + i), **KEY)
                results.append((cid, new))
        except BaseException as exc:  # surfaced below: a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(first if t % 2 else second, 7 * t)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sum(new for _, new in results) == len(sources)
    rows = first.candidates(run)
    assert sorted(c.sha256 for c in rows) == sorted(source_sha256(s) for s in sources)
    assert {cid for cid, _ in results} == {c.id for c in rows}
    assert all(c.verdict_id is not None for c in rows)
    first.close()
    second.close()


CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from kernelwright.search.db import RunDB

db = RunDB(sys.argv[2])
problem = db.add_problem("problems/relu.py", "class Model: pass\n")
run = db.start_run(problem, generator="llm", strategy="evolutionary", settings={}, arch="sm_90a",
                   toolchain="tc-1", device="cpu")
print("run", run, flush=True)
i = 0
while True:
    call = db.record_llm_call(run, tag="mutate", model="m", base_url=None, messages=[{"role": "user",
                              "content": "x" * 2000}], response_text="y" * 2000, reasoning_text=None,
                              prompt_tokens=10, completion_tokens=20, cost_usd=None, latency_s=0.1, attempts=1,
                              error=None)
    cid, _ = db.add_candidate(run, f"# candidate {i}\n" + "z" * 4000, origin="llm", round=i, llm_call_id=call)
    db.record_verdict(cid, {"status": "passed", "timing": {"candidate": {"median_ms": 1.0 + i}},
                            "speedups": {"vs_eager": 2.0}}, arch="sm_90a", toolchain="tc-1", options_key="k")
    print(cid, flush=True)
    i += 1
"""


def test_sigkill_loses_nothing_returned_and_the_run_resumes(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    stderr = tmp_path / "child.err"
    with open(stderr, "w") as err:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(SRC), str(path)], stdout=subprocess.PIPE,
                                 stderr=err, text=True)
        try:
            header = child.stdout.readline()
            assert header.startswith("run "), stderr.read_text()
            run = int(header.split()[1])
            printed = []
            while len(printed) < 200:
                line = child.stdout.readline()
                assert line, f"the writer died early: {stderr.read_text()}"
                printed.append(int(line))
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            # Lines written between the 200th and the kill were returned too: they must be there as well.
            printed += [int(line) for line in child.stdout.read().splitlines(keepends=True) if line.endswith("\n")]
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == -signal.SIGKILL

    plain = sqlite3.connect(path)
    assert plain.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    plain.close()
    with RunDB(path) as db:
        by_id = {c.id: c for c in db.candidates(run)}
        for cid in printed:
            assert by_id[cid].status == "passed" and by_id[cid].verdict_id is not None, cid
            assert by_id[cid].median_ms == 1.0 + by_id[cid].round
        assert db.runs()[0].status == "interrupted" and db.run(run).status == "interrupted"

        resumed = db.resume_run(run)
        assert (resumed.status, resumed.pid, resumed.resumes, resumed.finished) == ("running", os.getpid(), 1, None)
        assert db.runs()[0].status == "running"
        cid, new = db.add_candidate(run, "# after the resume\n", origin="seed")
        assert new and cid > max(printed)
        db.finish_run(run, "finished", {"resumed": True})


def test_a_live_run_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); from kernelwright.search.db import RunDB; "
              "db = RunDB(sys.argv[2]); p = db.add_problem('p.py', 'x'); "
              "print(db.start_run(p, generator='llm', strategy='s', settings={}, arch='a', toolchain='t', "
              "device='d'), flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", script, str(SRC), str(path)], stdout=subprocess.PIPE, text=True)
    try:
        run = int(child.stdout.readline())
        with RunDB(path) as db:
            assert db.run(run).status == "running"
            with pytest.raises(InputError, match="still running"):
                db.resume_run(run)
    finally:
        child.kill()
        child.wait()
    with RunDB(path) as db:
        assert db.run(run).status == "interrupted"
