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


def test_a_bench_row_reads_what_executed_and_says_where_it_came_from() -> None:
    """Issue 44: the row's tensor-core column and instruction mix come from the profiled call where one ran (the
    recorded sdpa verdict with an executed section laid over it), from the SASS, marked static, where none did."""
    from dataclasses import replace

    from kernelwright.bench.report import _tensor_cell
    from kernelwright.bench.rows import row_from_verdict
    from kernelwright.verify.executed import ExecutedEvidence, ExecutedKernelRow
    from kernelwright.verify.report import render

    verdict = Verdict.from_json(json.loads((DATA / "verdict-h200-sdpa.json").read_text()))
    static = row_from_verdict(verdict, name="sdpa", path="p.py", mode="optimize")
    assert static["tensor_core"] == ["HGMMA"] and static["instructions_from"].startswith("static")
    assert _tensor_cell(static) == "HGMMA (static)"
    kernel = verdict.instructions[0].name
    ran = ExecutedEvidence(ran=True, seconds=4.2, kernels=(
        ExecutedKernelRow(name=kernel, own=True, launches=1, duration_ns=170_000.0, share=0.9,
                          executed={"tensor_mma": 4_194_304.0, "global_store": 8192.0},
                          present={"tensor_mma": 64}, mma_types={"bf16": 4_194_304.0}),
        ExecutedKernelRow(name="elementwise_kernel", own=False, launches=1, duration_ns=19_000.0, share=0.1)))
    row = row_from_verdict(replace(verdict, executed=ran), name="sdpa", path="p.py", mode="optimize")
    assert row["instructions_from"] == "executed" and row["tensor_core"] == ["HGMMA"]
    assert row["instruction_mix"] == {"tensor_mma": 4_194_304, "global_store": 8192}
    assert _tensor_cell(row) == "HGMMA"
    table = render(replace(verdict, executed=ran))
    assert "executed     tensor_mma 64 in SASS / 4194304 executed; global_store 0 in SASS / 8192 executed; own " \
           "kernels 90% of the call's device time" in table, table
    # An MMA that never ran leaves the executed column empty, whatever the SASS holds.
    dead = replace(ran, kernels=(replace(ran.kernels[0], executed={"global_store": 8192.0}),))
    assert row_from_verdict(replace(verdict, executed=dead), name="sdpa", path="p.py", mode="o")["tensor_core"] == []
