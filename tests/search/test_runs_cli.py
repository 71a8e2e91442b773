"""``kernelwright runs`` and ``kernelwright runs show``: text, JSON, and one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.search.db import RunDB


@pytest.fixture
def database(tmp_path: Path) -> tuple[Path, int, int]:
    """Two runs: a finished LLM run with candidates, calls and a scaling curve, and a template run."""
    path = tmp_path / "runs.sqlite"
    with RunDB(path) as db:
        problem = db.add_problem("problems/softmax.py", "class Model: pass\n")
        llm = db.start_run(problem, generator="llm", strategy="evolutionary",
                           settings={"budget_s": 600, "model": "deepseek-reasoner"}, arch="sm_90a",
                           toolchain="torch-2.5/triton-3.1", device="NVIDIA H200")
        call = db.record_llm_call(llm, tag="seed", model="deepseek-reasoner", base_url="https://api.deepseek.com",
                                  messages=[{"role": "user", "content": "..."}], response_text="...",
                                  reasoning_text=None, prompt_tokens=9000, completion_tokens=3345, cost_usd=0.0125,
                                  latency_s=41.0, attempts=1, error=None)
        seed, _ = db.add_candidate(llm, "seed", origin="llm", llm_call_id=call)
        child, _ = db.add_candidate(llm, "child", origin="mutation", parent_id=seed, lineage=0, round=1)
        db.record_verdict(seed, {"status": "passed", "timing": {"candidate": {"median_ms": 0.0421}},
                                 "speedups": {"vs_eager": 1.93}}, arch="sm_90a", toolchain="t", options_key="k")
        db.record_verdict(child, {"status": "incorrect", "timing": {}}, arch="sm_90a", toolchain="t",
                          options_key="k")
        db.finish_run(llm, "finished", {
            "best_candidate": seed,
            "scaling_curve": [{"candidates": 1, "best_ms": 0.0421}, {"candidates": 2, "best_ms": 0.0421}],
            "stopped_by": "budget",
        })
        templates = db.start_run(problem, generator="templates", strategy="coordinate-descent", settings={},
                                 arch="sm_90a", toolchain="t", device="cpu")
    return path, llm, templates


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert captured.out == ""
    return err


def test_list(database: tuple[Path, int, int], capsys: pytest.CaptureFixture[str]) -> None:
    path, llm, templates = database
    assert main(["runs", "--db", str(path)]) == 0
    header, newest, older = capsys.readouterr().out.strip().splitlines()
    assert header.split()[:3] == ["id", "started", "problem"]
    assert newest.split()[0] == str(templates) and "templates/coordinate-descent" in newest
    assert "running" in newest  # never finished, and its process (this one) is alive
    assert older.split()[0] == str(llm)
    for text in ("llm/evolutionary", "finished", "0.0421", "1.93x", "12,345", "$0.0125"):
        assert text in older, text


def test_list_json_and_limit(database: tuple[Path, int, int], capsys: pytest.CaptureFixture[str]) -> None:
    path, llm, _ = database
    assert main(["runs", "--db", str(path), "--json", "--limit", "1"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only["generator"] == "templates" and only["candidates"] == 0
    assert main(["runs", "--json", "--db", str(path)]) == 0
    by_id = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert (by_id[llm]["passed"], by_id[llm]["best_ms"], by_id[llm]["tokens"]) == (1, 0.0421, 12345)


def test_show(database: tuple[Path, int, int], capsys: pytest.CaptureFixture[str]) -> None:
    path, llm, _ = database
    assert main(["runs", "show", str(llm), "--db", str(path)]) == 0
    out = capsys.readouterr().out
    for text in ("run 1: softmax", "generator llm, strategy evolutionary", "sm_90a on NVIDIA H200",
                 "budget_s: 600", "model: deepseek-reasoner", "1 call, 12,345 tokens", "$0.0125",
                 "candidates (2, 1 passed)", "stopped_by: budget", "scaling_curve:"):
        assert text in out, text
    table = out.split("candidates (2, 1 passed)\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split() == ["id", "origin", "lineage", "round", "parent", "status", "ms", "vs", "eager"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["1"][1:] == ["llm", "0", "0", "-", "passed", "0.0421", "1.93x"]
    assert rows["2"][1:] == ["mutation", "0", "1", "1", "incorrect", "-", "-"]


def test_show_json_parses(database: tuple[Path, int, int], capsys: pytest.CaptureFixture[str]) -> None:
    path, llm, _ = database
    assert main(["runs", "--db", str(path), "show", str(llm), "--json"]) == 0  # options either side of 'show'
    data = json.loads(capsys.readouterr().out)
    assert data["run"]["summary"]["stopped_by"] == "budget"
    assert [c["status"] for c in data["candidates"]] == ["passed", "incorrect"]
    assert "source" not in data["candidates"][0]
    assert data["llm_usage"]["calls"] == 1


def test_unknown_run_is_one_line_naming_the_newest(database: tuple[Path, int, int],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path, llm, templates = database
    assert main(["runs", "show", "404", "--db", str(path)]) == 2
    err = _one_line_error(capsys)
    assert "no run 404" in err and f"newest: {templates}, {llm}" in err


def test_missing_database_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing-here.sqlite"
    assert main(["runs", "--db", str(missing)]) == 2
    err = _one_line_error(capsys)
    assert "no runs yet" in err and str(missing) in err
    assert not missing.exists()  # reading never creates the file
    assert main(["runs", "show", "1", "--db", str(missing)]) == 2
    _one_line_error(capsys)


def test_empty_database_lists_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    RunDB(tmp_path / "runs.sqlite").close()
    assert main(["runs", "--db", str(tmp_path / "runs.sqlite")]) == 0
    assert "no runs recorded" in capsys.readouterr().out
