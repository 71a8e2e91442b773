"""The verdict as typed records: timing as Measurements, the roofline a Roofline, kernels KernelRecords, the
instruction evidence KernelSummaries — read back from two real verdicts of the H200 (bench run 22, 2026-12-02:
`argmax_lastdim`, `attention_sdpa_bf16`), so the GPU-only paths that read them (the verdict table, bench rows,
the LLM's feedback, the baseline cache) are exercised on any machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.inspect.analysis import KernelSummary
from kernelwright.jobs import KernelRecord, Measurement
from kernelwright.verify.records import Verdict
from kernelwright.verify.roofline import Roofline

DATA = Path(__file__).parent / "data"
VERDICTS = sorted(DATA.glob("verdict-h200-*.json"))


@pytest.mark.parametrize("path", VERDICTS, ids=lambda p: p.stem)
def test_a_gpu_verdict_reads_back_typed_and_writes_the_same_json(path: Path) -> None:
    data = json.loads(path.read_text())
    verdict = Verdict.from_json(data)
    assert all(isinstance(m, Measurement) for m in verdict.timing.values())
    assert isinstance(verdict.roofline, Roofline) and verdict.roofline.achievable_floor_ms
    assert verdict.kernels and all(isinstance(k, KernelRecord) for k in verdict.kernels)
    assert verdict.instructions and all(isinstance(i, KernelSummary) for i in verdict.instructions)
    assert verdict.median_ms() == data["timing"]["candidate"]["median_ms"]
    assert verdict.median_ms("compile_max_autotune") == data["timing"]["compile_max_autotune"]["median_ms"]
    assert verdict.median_ms("no such baseline") is None
    assert json.loads(json.dumps(verdict.to_json())) == data  # nothing lost, nothing renamed


@pytest.mark.parametrize("path", VERDICTS, ids=lambda p: p.stem)
def test_the_readers_of_a_gpu_verdict(path: Path) -> None:
    from kernelwright.bench.rows import row_from_verdict
    from kernelwright.llm.feedback import feedback
    from kernelwright.llm.prompting import Attempt
    from kernelwright.verify.report import render

    verdict = Verdict.from_json(json.loads(path.read_text()))
    table = render(verdict)
    assert "candidate" in table and "roofline" in table and "own:" in table and "regs" in table
    row = row_from_verdict(verdict, name=path.stem, path="p.py", mode="optimize")
    assert row["timed"] and row["ms"]["candidate"] == verdict.median_ms()
    assert row["speedup"]["eager"] == pytest.approx(verdict.median_ms("eager") / verdict.median_ms())
    assert row["floor_ms"] == verdict.roofline.achievable_floor_ms and row["instruction_mix"]
    text = feedback(Attempt(source="", verdict=verdict, failure=None, label="winner"))
    assert "Timing (median): candidate" in text and "Roofline:" in text and "Instructions" in text
