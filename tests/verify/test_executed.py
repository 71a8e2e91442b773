"""Executed-instruction evidence (issue 44, verify/executed.py) on the CPU: the profile job under a stand-in for
Nsight Compute (it runs the wrapped job, its pipe passed through, then prints a report in ncu's raw CSV), the
evidence read into classes present and executed, and the findings it adds; a missing, failing or hanging profiler
is a note and the static view. The real ncu on real kernels is tests/verify/test_executed_gpu.py's."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from kernelwright.inspect.analysis import KernelSummary
from kernelwright.records import DEFAULT_POLICY, ProblemTraits, Severity
from kernelwright.verify import executed
from kernelwright.verify.findings import Judge
from kernelwright.verify.records import Verdict
from kernelwright.verify.report import executed_lines

HERE = Path(__file__).parent
SOFTMAX = HERE / "problems" / "softmax.py"
CANDIDATE = HERE / "candidates" / "softmax_ok.py"
FP32 = ProblemTraits(dominant="matmul", compute_dtype="float32", policy=DEFAULT_POLICY)

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","gpu__time_duration.sum","sass__inst_executed_per_opcode",'
          '"sass__thread_inst_executed_true_per_opcode"\n'
          '"","","","","","","","","","","","nsecond","inst","inst"\n')


def _row(i: int, name: str, ns: int, opcodes: str, true: str = "") -> str:
    return (f'"{i}","4242","python3","host","{name}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","{ns:,}",'
            f'"{opcodes}","{true}"\n')


FAKE_NCU = '''#!{python}
"""A stand-in for ncu: runs the program after its options (the job's pipe passed through), then prints the report
written into this file, as ncu prints its CSV after the profiled program's own output."""
import subprocess, sys, time

args = sys.argv[1:]
program = args[args.index("-m") - 1:]  # ... python -m kernelwright.isolation.child profile SPEC FD
{before}
rc = subprocess.call(program, pass_fds=(int(program[-1]),))
sys.stdout.write("==PROF== Disconnected from process 4242\\n")
sys.stdout.write({report!r})
sys.exit(rc)
'''


def _fake_ncu(tmp_path: Path, report: str, before: str = "") -> str:
    path = tmp_path / f"ncu-{len(list(tmp_path.iterdir()))}"
    path.write_text(FAKE_NCU.format(python=sys.executable, report=report, before=before))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _summary(name: str, classes: dict[str, int], mma_types: dict[str, int] | None = None,
             ptx: dict[str, int] | None = None) -> KernelSummary:
    return KernelSummary(name=name, arch="sm_90a", origin="triton", tool="cuobjdump 13.1", registers=64,
                         shared_bytes=0, static_shared_bytes=0, dynamic_shared_known=True, stack_bytes=0,
                         histogram_by_class=classes, mma_types=mma_types or {}, ptx_available=ptx is not None,
                         ptx_evidence=ptx or {})


def _profile(tmp_path: Path, report: str, static: list[KernelSummary], before: str = "",
             timeout_s: float = 120.0) -> executed.ExecutedEvidence:
    return executed.profile(SOFTMAX, CANDIDATE, device="cpu", seed=3, size_overrides=None, timeout_s=timeout_s,
                            static=static, tool_path=_fake_ncu(tmp_path, report, before))


def test_the_profiled_call_counts_what_ran_and_a_dead_wgmma_is_named(tmp_path: Path) -> None:
    # The candidate's kernel carries HGMMA and TMA loads in its SASS, but the call ran only its FFMA path.
    static = [_summary("softmax_kernel", {"wgmma": 64, "tma": 8, "global_load": 12, "fp32": 300})]
    report = HEADER + _row(0, "softmax_kernel", 30_000, "LDG.E 4,096; STG.E 4,096; FFMA 65,536",
                           "LDG.E 131,072; FFMA 2,097,152") + _row(1, "elementwise_kernel", 10_000, "LDG.E 512; STG.E 512")
    found = _profile(tmp_path, report, static)
    assert found.ran, found.note
    own = next(k for k in found.kernels if k.own)
    assert own.executed == {"global_load": 4096, "global_store": 4096}
    assert own.predicated_true == {"global_load": 131_072}
    assert own.present == {"tensor_mma": 64, "tma": 8, "global_load": 12}
    assert found.own_share == pytest.approx(0.75)
    assert found.classes()["tensor_mma"] == {"present": 64, "executed": 0}
    judge = Judge()
    executed.judge_evidence(judge, found, static, FP32)
    (dead,) = [f for f in judge.findings if f.code == "dead-instruction-claim"]
    assert dead.severity is Severity.WARNING and dead.details["instruction_classes"] == ["tensor_mma", "tma"]
    assert "64 tensor-core MMA, 8 TMA / bulk-copy instruction(s)" in dead.message, dead.message
    assert "tensor_mma 64 in SASS / 0 executed" in executed_lines(found)[0]
    # The section survives the verdict's JSON.
    again = executed.ExecutedEvidence.from_json(found.to_json())
    assert again.classes() == found.classes() and again.own_share == found.own_share


def test_executed_tf32_mmas_in_an_fp32_problem_are_named_and_3xtf32_is_not(tmp_path: Path) -> None:
    tf32 = [_summary("softmax_kernel", {"wgmma": 32}, mma_types={"tf32": 32})]
    report = HEADER + _row(0, "softmax_kernel", 50_000, "HGMMA 8,192; LDG.E 1,024")
    found = _profile(tmp_path, report, tf32)
    assert found.kernels[0].mma_types == {"tf32": 8192}  # bare opcodes: the types come from the SASS
    judge = Judge()
    executed.judge_evidence(judge, found, tf32, FP32)
    (below,) = [f for f in judge.findings if f.code == "executed-precision-below-problem"]
    assert below.severity is Severity.WARNING and "8192 MMA instructions executed (tf32 8192)" in below.message
    assert not any(f.code == "dead-instruction-claim" for f in judge.findings)
    # Split-precision emulation in the PTX: the static check calls it fp32-accurate, so nothing executed is below.
    split = [_summary("softmax_kernel", {"wgmma": 96}, mma_types={"tf32": 96}, ptx={"cvt_tf32": 6, "sub_f32": 4})]
    judge = Judge()
    executed.judge_evidence(judge, executed.evidence(split, executed.parse_launches(report)), split, FP32)
    assert not judge.findings, judge.findings


def test_a_kernel_never_launched_by_the_call_is_a_dead_claim_too(tmp_path: Path) -> None:
    static = [_summary("softmax_kernel", {"global_load": 4}), _summary("softmax_wgmma_path", {"wgmma": 16})]
    report = HEADER + _row(0, "softmax_kernel", 1_000, "LDG.E 64; STG.E 64")
    found = executed.evidence(static, executed.parse_launches(report))
    judge = Judge()
    executed.judge_evidence(judge, found, static, FP32)
    (dead,) = judge.findings
    assert dead.code == "dead-instruction-claim" and "never launched" in dead.message


def test_no_profiler_a_failing_one_and_a_hanging_one_are_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setattr(executed, "find_profiler", lambda: None)
    missing = executed.profile(SOFTMAX, CANDIDATE, device="cpu", seed=3, size_overrides=None, timeout_s=60,
                               static=[])
    assert not missing.ran and "not on this machine" in missing.note
    failing = _profile(tmp_path, "", [], before='sys.stderr.write("==ERROR== The application returned an error\\n")'
                                               "\nsys.exit(9)")
    assert not failing.ran and "did not finish under ncu" in failing.note, failing.note
    denied = _profile(tmp_path, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n", [])
    assert not denied.ran and "ERR_NVGPUCTRPERM" in denied.note
    hanging = _profile(tmp_path, "", [], before="time.sleep(60)", timeout_s=3)
    assert not hanging.ran and "within 3 s" in hanging.note, hanging.note


def test_a_cpu_verdict_has_no_executed_section_and_reads_back_without_one() -> None:
    data = {"status": "passed", "message": "ok", "clean": True, "problem": "p", "candidate": "c",
            "problem_sha256": "", "candidate_sha256": "", "seed": 1}
    verdict = Verdict.from_json(data)
    assert verdict.executed is None and "executed" not in verdict.to_json()
