"""`kernelwright generate`: a plain-language request becomes a problem that is proven to run (in the isolated child),
with failures fed back, and is then optimized like any problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_server import Reply
from stubs import reply_with

from kernelwright.cli import main

ROOT = Path(__file__).resolve().parents[2]

GOOD = """import torch
import torch.nn as nn

rows, cols = 64, 512


class Model(nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]
"""
NAN = GOOD.replace("return a + b", "return torch.log(-(a * a) - 1.0)")


def _env(monkeypatch, tmp_path):
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "KERNELWRIGHT_LLM_BASE_URL", "KERNELWRIGHT_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernelwright.toml").write_text("[llm]\nbackoff_s = 0.01\n")


@pytest.mark.slow
def test_a_request_becomes_a_problem_that_runs_with_failures_fed_back(tmp_path, monkeypatch, fake_llm, capsys):
    _env(monkeypatch, tmp_path)
    server = fake_llm([Reply(content="A problem for that would add two matrices."),
                       Reply(content=reply_with(NAN)), Reply(content=reply_with(GOOD), reasoning="PRIVATE")])
    code = main(["generate", "elementwise add of two 64x512 fp32 matrices", "--no-optimize", "--device", "cpu",
                 "--base-url", server.base_url, "--out", str(tmp_path / "gen")])
    assert code == 0
    saved = tmp_path / "gen" / "elementwise_add_of_two_64x512_fp32.py"
    assert saved.read_text().startswith(GOOD) and "def get_init_inputs" in saved.read_text()  # added when missing
    assert "ran on cpu" in capsys.readouterr().out
    second, third = (json.dumps(r["messages"]) for r in server.requests[1:])
    assert "could not be used" in second and "code block" in second
    assert "NaN or inf" in third  # the probe's verdict on the NaN problem went back to the model
    exchange = json.loads((tmp_path / "gen" / "problem-request.json").read_text())
    assert [("failure" in e) for e in exchange] == [True, True, False]
    assert not any("PRIVATE" in json.dumps(r) for r in server.requests)


def test_generate_then_optimizes_the_problem_with_the_real_verifier(tmp_path, monkeypatch, fake_llm):
    _env(monkeypatch, tmp_path)
    honest = (ROOT / "examples" / "vector_add_triton.py").read_text()
    server = fake_llm([Reply(content=reply_with(GOOD)), Reply(content=reply_with(honest))])
    code = main(["generate", "add two matrices", "--device", "cpu", "--base-url", server.base_url,
                 "--out", str(tmp_path / "gen"), "--max-candidates", "1", "--samples", "1",
                 "--db", str(tmp_path / "runs.sqlite")])
    assert code == 0
    assert (tmp_path / "gen" / "best.py").read_text() == honest
    assert json.loads((tmp_path / "gen" / "verdict.json").read_text())["status"] == "passed"


@pytest.mark.slow
def test_runs_lists_the_llm_run(tmp_path, monkeypatch, fake_llm, capsys):
    _env(monkeypatch, tmp_path)
    honest = (ROOT / "examples" / "vector_add_triton.py").read_text()
    problem = tmp_path / "add.py"
    problem.write_text(GOOD + "\n\ndef get_init_inputs():\n    return []\n")
    server = fake_llm([Reply(content="no code here"), Reply(content=reply_with(honest))])
    assert main(["optimize", str(problem), "--generator", "llm", "--device", "cpu", "--base-url", server.base_url,
                 "--out", str(tmp_path / "run"), "--max-candidates", "2", "--samples", "1",
                 "--db", str(tmp_path / "runs.sqlite")]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", str(tmp_path / "runs.sqlite"), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    rows = runs if isinstance(runs, list) else runs.get("runs", [])
    assert len(rows) == 1 and rows[0]["status"] == "finished"


@pytest.mark.slow
def test_resume_continues_with_the_runs_own_problem_not_a_new_one(tmp_path, monkeypatch, fake_llm):
    from kernelwright.search.db import RunDB

    _env(monkeypatch, tmp_path)
    args = ["generate", "add two matrices", "--device", "cpu", "--out", str(tmp_path / "gen"), "--max-candidates",
            "1", "--samples", "1", "--db", str(tmp_path / "runs.sqlite")]
    first = fake_llm([Reply(content=reply_with(GOOD)), Reply(content="no code, sorry")])
    assert main([*args, "--base-url", first.base_url]) == 1
    with RunDB(tmp_path / "runs.sqlite") as db:
        run_id = db.runs()[0].id
        db.finish_run(run_id, "interrupted", {})  # as a kill would leave it
    saved = tmp_path / "gen" / "add_two_matrices.py"
    problem = saved.read_text()
    other = GOOD.replace("rows, cols = 64, 512", "rows, cols = 32, 256")
    second = fake_llm([Reply(content=reply_with(other)), Reply(content="no code again")])
    assert main([*args, "--base-url", second.base_url, "--resume", str(run_id)]) == 1
    assert saved.read_text() == problem  # not overwritten by a new answer
    assert len(second.requests) == 1 and "ModelNew" in json.dumps(second.requests[0])  # the loop's call only
    with RunDB(tmp_path / "runs.sqlite") as db:
        assert db.run(run_id).status == "finished" and db.run(run_id).resumes == 1
