"""The bench's outputs from real verdicts (three H200 winners recorded on 2026-12-02 in benchmarks/results/runs):
results.json's schema, the markdown table, and report.html opened in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelwright.bench import rows
from kernelwright.bench.report import NOT_TIMED, PLOTS, SCHEMA, write_outputs
from kernelwright.bench.runner import BenchOutcome, BenchSettings
from kernelwright.verify.records import Verdict, finite_json

RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "runs"
MACHINE = {"device": "NVIDIA H200", "torch": "2.11.0+cu130", "triton": "3.6.0", "kernelwright": "0.1.0"}


def _outcome(out: Path, *, device: str = "cuda") -> BenchOutcome:
    table = []
    for run in sorted(RUNS.iterdir()):
        verdict = Verdict.from_json(json.loads((run / "verdict.json").read_text()))
        table.append(finite_json(rows.row_from_verdict(verdict, name=run.name, path=f"{run.name}.py",
                                                       mode="optimize", best_py=str(run / "best.py"),
                                                       report_md=str(run / "report.md"))))
    table.append(rows.failure_row(name="sort_rows", path="sort_rows.py", mode="optimize", status="unsupported",
                                  message="no template covers any part of sort_rows.py (aten sort)"))
    return BenchOutcome(rows=table, machine=MACHINE, settings=BenchSettings(out_dir=out, device=device))


def test_results_json_holds_the_rows_and_scores(tmp_path: Path) -> None:
    written = write_outputs(_outcome(tmp_path), tmp_path, formats=("json", "md"))
    doc = json.loads(written["json"].read_text())
    assert doc["schema"] == SCHEMA and doc["timed"] and doc["machine"]["device"] == "NVIDIA H200"
    by_name = {r["name"]: r for r in doc["problems"]}
    causal = by_name["attention_causal_fp16"]
    assert causal["tensor_core"] == ["HGMMA"] and causal["matmul_dominant"]
    assert causal["speedup"]["compile_max_autotune"] == pytest.approx(0.8852 / 0.11552, rel=1e-3)
    assert 0 < causal["sol_score"] <= 1 and causal["arithmetic_intensity"] > 100
    assert doc["summary"]["fast_0"] == 0.75 and doc["summary"]["statuses"]["unsupported"] == 1
    md = written["md"].read_text()
    assert "| attention_causal_fp16 | passed | 0.1155 |" in md and "vs max-autotune: geomean" in md


def test_a_cpu_bench_says_nothing_was_timed(tmp_path: Path) -> None:
    outcome = _outcome(tmp_path, device="cpu")
    for r in outcome.rows:
        r["timed"], r["ms"], r["speedup"] = False, dict.fromkeys(r["ms"]), dict.fromkeys(r["speedup"])
    written = write_outputs(outcome, tmp_path, formats=("json", "md"))
    assert json.loads(written["json"].read_text())["note"] == NOT_TIMED
    assert NOT_TIMED in written["md"].read_text()


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium not installed (.ci/run installs Debian's)")
def test_report_html_opens_in_chromium_with_every_plot_and_no_console_error(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = write_outputs(_outcome(tmp_path), tmp_path)
    html = written["html"].read_text()
    # Self-contained: nothing is fetched when it is opened (SVG namespace URIs are names, not requests).
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:|url\(\s*["']?https?:|<link\b|<script\s+src""", html)
    browser = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}"]
    url = written["html"].resolve().as_uri()
    shot = tmp_path / "report.png"
    run = subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1280,2600", url], capture_output=True,
                         text=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 10_000, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    for key, _, _ in PLOTS:
        figure = re.search(rf'<figure class="plot" data-plot="{key}">(.*?)</figure>', dom, re.S)
        assert figure is not None, f"plot {key} missing"
        assert "<svg" in figure.group(1) and figure.group(1).count("<path") >= 3, f"plot {key} is empty"
    assert dom.count("<tr class=\"passed\">") == 3 and "sort_rows" in dom


def test_eager_at_pytorch_defaults_is_shown_beside_ieee_eager(tmp_path: Path) -> None:
    """An fp32 convolution's verify times eager twice (issue 29 item 5): at the problem's precision (the scores'
    ratio) and as PyTorch's defaults run it (TF32 cuDNN); the row keeps both and report.md says which is which."""
    from kernelwright.bench.report import markdown

    doc = json.loads((RUNS / "argmax_lastdim" / "verdict.json").read_text())
    eager = doc["timing"]["eager"]
    doc["timing"]["eager_defaults"] = {**eager, "median_ms": eager["median_ms"] / 2}
    verdict = Verdict.from_json(doc)
    row = finite_json(rows.row_from_verdict(verdict, name="conv_fp32", path="conv_fp32.py", mode="optimize"))
    assert row["ms"]["eager_defaults"] == pytest.approx(eager["median_ms"] / 2)
    assert row["speedup"]["eager_defaults"] == pytest.approx(row["speedup"]["eager"] / 2)
    written = write_outputs(BenchOutcome(rows=[row], machine=MACHINE,
                                         settings=BenchSettings(out_dir=tmp_path, device="cuda")),
                            tmp_path, formats=("json", "md"))
    md = written["md"].read_text()
    assert "| problem | kernelwright ms | eager ms (IEEE fp32) | eager ms (PyTorch's defaults) |" in md
    assert f"{row['speedup']['eager_defaults']:.2f}x |" in md
    plain = rows.row_from_verdict(Verdict.from_json(json.loads((RUNS / "argmax_lastdim" / "verdict.json").read_text())),
                                  name="argmax", path="argmax.py", mode="optimize")
    assert "eager_defaults" not in plain["ms"]  # no convolution: nothing timed twice, no second table
    assert "PyTorch's defaults" not in markdown(json.loads(write_outputs(
        BenchOutcome(rows=[finite_json(plain)], machine=MACHINE,
                     settings=BenchSettings(out_dir=tmp_path / "p", device="cuda")),
        tmp_path / "p", formats=("json",))["json"].read_text()))


def test_ptx_rewrites_are_summarised_per_pass_over_the_rows(tmp_path: Path) -> None:
    """Issue 30 item 2: per pass set, the rows where the search kept the rewrite and by how much, and the rows where
    it was timed and not kept; a winner with rewritten PTX says so in its back end cell."""
    from kernelwright.bench.report import markdown

    table = _outcome(tmp_path).rows
    table[0]["ptx_rewrites"] = [{"passes": ["no-allocate-loads"], "speedup": 1.034, "kept": True},
                                {"passes": ["streaming-stores"], "speedup": 0.998, "kept": False}]
    table[0]["backends"] = ["triton", "ptx no-allocate-loads"]
    table[1]["ptx_rewrites"] = [{"passes": ["no-allocate-loads"], "speedup": 1.004, "kept": False},
                                {"passes": ["streaming-stores"], "speedup": None, "kept": False}]
    doc = json.loads(write_outputs(BenchOutcome(rows=table, machine=MACHINE, settings=BenchSettings(
        out_dir=tmp_path, device="cuda")), tmp_path, formats=("json",))["json"].read_text())
    md = markdown(doc)
    first, second = table[0]["name"], table[1]["name"]
    assert f"| no-allocate-loads | 2 | 1 | {first} 1.034x | {second} 1.004x |" in md
    assert f"| streaming-stores | 2 | 0 | - | {first} 0.998x, {second} (not timed) |" in md
    assert "| triton, ptx no-allocate-loads |" in md
    assert "PTX rewrites of each row" not in markdown({**doc, "problems": [
        {k: v for k, v in r.items() if k != "ptx_rewrites"} for r in doc["problems"]]})
