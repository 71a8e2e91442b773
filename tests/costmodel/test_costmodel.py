"""The cost model (issue 31) on a small run database whose timings follow a rule of the configuration: held-out
problems are ordered well above random and above the search's own (shuffled) order, a control with the timings
shuffled is not, and ``kernelwright model`` trains, saves, shows (stale or current) and evaluates."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightgbm")

from kernelwright.cli import main  # noqa: E402
from kernelwright.costmodel import model as cm  # noqa: E402
from kernelwright.costmodel.data import load  # noqa: E402
from kernelwright.costmodel.features import candidate_features, config_values  # noqa: E402
from kernelwright.errors import InputError  # noqa: E402
from kernelwright.search.db import RunDB  # noqa: E402

CONFIGS = [(bm, w) for bm in (32, 64, 128, 256) for w in (4, 8)]


def _source(bm: int, warps: int) -> str:
    return ("@triton.jit\ndef kw_gemm_0_kernel(a, BLOCK_M: tl.constexpr):\n    pass\n\n\n"
            f"def kw_gemm_0(a):\n    BLOCK_N = 64\n    kw_gemm_0_kernel[(1,)](a, BLOCK_M={bm}, BLOCK_N=BLOCK_N, "
            f"num_warps={warps}, num_stages=3)\n    return (a,)\n")


def _ms(bm: int, warps: int, rng: random.Random) -> float:
    """The rule: 128-row tiles best, 8 warps a little better, a little noise."""
    return 1.0 + abs(math.log2(bm) - 7) + (0.3 if warps == 4 else 0.0) + rng.uniform(0, 0.05)


def _database(path: Path, problems: int = 8, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with RunDB(path) as db:
        for p in range(problems):
            pid = db.add_problem(f"/p/problem_{p}.py", f"# problem {p}\n")
            run = db.start_run(pid, generator="templates", strategy="coordinate-descent", settings={},
                               arch="sm_90a", toolchain="t", device="H200")
            order = list(CONFIGS)
            rng.shuffle(order)  # the search's order here knows nothing: the model has to learn the rule
            for bm, warps in order:
                cid, _ = db.add_candidate(run, _source(bm, warps), origin="template")
                db.update_candidate(cid, status="timed", median_ms=_ms(bm, warps, rng))
    return path


def test_features_read_the_launch_configuration() -> None:
    source = _source(128, 8)
    assert config_values(source) == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
    features = candidate_features(source, {"flops": 2e9, "bytes": 1e8, "bound": "compute"}, "sm_90a")
    assert features["tile_log2"] == 13 and features["family_gemm"] == 1.0 and features["mark_tma"] == 0.0
    assert features["problem_log_flops"] == pytest.approx(math.log10(2e9)) and features["arch_sm"] == 90
    assert math.isnan(candidate_features(source)["problem_log_bytes"])  # unknown: missing, not zero


def test_held_out_problems_are_ordered_better_than_random_and_the_control_is_not(tmp_path: Path) -> None:
    data = load([_database(tmp_path / "runs.sqlite")])
    assert len(data.rows) == 8 * len(CONFIGS) and len(data.groups) == 8
    summary = cm.summarize(cm.cross_validate(data, "problem"))
    assert summary["runs"] == 8
    model, search, chance = summary["model"], summary["search_order"], summary["random"]
    assert model["tau"] > 0.6 and model["tau"] > search["tau"] + 0.3
    assert model["top1"] >= 0.75 > chance["top1"]
    assert model["measured_to_5pct"] < chance["measured_to_5pct"]
    assert chance["top1"] == pytest.approx(1 / len(CONFIGS), abs=0.02)  # one best per run (its noise is small)
    control = cm.summarize(cm.cross_validate(cm.shuffled_control(data), "problem"))
    assert abs(control["model"]["tau"]) < 0.35  # timings shuffled within runs: nothing to learn


def test_metrics_on_known_orders() -> None:
    assert cm.kendall_tau([3, 2, 1], [1.0, 2.0, 3.0]) == 1.0  # highest score fastest: perfect
    assert cm.kendall_tau([1, 2, 3], [1.0, 2.0, 3.0]) == -1.0
    expected = cm._random_expectation([1.0, 2.0, 3.0, 4.0])
    assert expected["top1"] == 0.25 and expected["top5"] == 1.0
    assert expected["measured_to_5pct"] == pytest.approx(2.5 / 4)  # the best is on average the 2.5th measured


def test_model_command_trains_shows_and_evaluates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _database(tmp_path / "runs.sqlite")
    model = tmp_path / "cm" / "model.txt"
    assert main(["model", "train", "--db", str(db), "--out", str(model)]) == 0
    assert "trained on 64 timed candidates in 8 runs of 8 problems" in capsys.readouterr().out
    meta = json.loads(model.with_suffix(".json").read_text())
    assert meta["rows"] == 64 and meta["sources"] == [str(db)] and len(meta["data_digest"]) == 64
    assert main(["model", "show", "--model", str(model), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "; current" in out and "features by gain:" in out
    _database(db, problems=1, seed=5)  # another run lands in the database
    assert main(["model", "show", "--model", str(model), "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stale"] is True
    assert main(["model", "eval", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "| problem (runs>=2) | 9 | model |" in out and "shuffled timings (control)" in out


def test_bad_inputs_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load([tmp_path / "missing.sqlite"])
    (tmp_path / "junk.sqlite").write_text("not a database")
    with pytest.raises(InputError, match="not a kernelwright run database"):
        load([tmp_path / "junk.sqlite"])
    data = load([_database(tmp_path / "one.sqlite", problems=1)])
    with pytest.raises(InputError, match="too little data"):
        cm.train(data)
    with pytest.raises(InputError, match="train one with `kernelwright model train`"):
        cm.RankModel.load(tmp_path / "none.txt")
    monkeypatch.setitem(sys.modules, "lightgbm", None)
    with pytest.raises(InputError, match=r"kernelwright\[costmodel\]"):
        cm.train(data)


def test_search_ranker_puts_the_rule_first_and_keeps_the_top_part(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from kernelwright.costmodel.ranker import KEEP_MIN, SearchRanker, search_ranker

    data = load([_database(tmp_path / "runs.sqlite")])
    model = cm.train(data)
    assert model.meta["families"] == ["gemm"]
    candidates = []
    for i, (bm, warps) in enumerate(CONFIGS):
        path = tmp_path / f"c{i}.py"
        path.write_text(_source(bm, warps))
        candidates.append(SimpleNamespace(path=path, config=(bm, warps)))
    ranker = SearchRanker(model, "sm_90a")
    ordered = ranker.order(candidates, "gemm")
    assert ordered[0].config == (128, 8)  # the rule's best
    assert len(ordered) == max(KEEP_MIN, len(CONFIGS) // 2) + 1  # the top half and one explorer
    assert len({id(c) for c in ordered}) == len(ordered)
    assert ranker.order(candidates, "conv") == candidates  # a family it never saw: the templates' order
    assert search_ranker("sm_90a", enabled=False) is None
    assert search_ranker("sm_90a", path=tmp_path / "none.txt") is None  # no model trained: plain order
    model.save(tmp_path / "m" / "model.txt")
    assert isinstance(search_ranker("sm_90a", path=tmp_path / "m" / "model.txt"), SearchRanker)
