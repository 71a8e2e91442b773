"""``kernelwright inspect`` on CUDA sources, PTX and binaries; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.errors import ToolchainError
from kernelwright.inspect import tools


def _has_nvcc() -> bool:
    try:
        tools.find_tool("nvcc")
    except ToolchainError:
        return False
    return True


@pytest.mark.skipif(not _has_nvcc(), reason="nvcc not installed")
def test_cuda_source_for_several_archs_as_json(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["inspect", str(data_dir / "wmma.cu"), "--arch", "sm_80,sm_90a", "--dominant", "matmul",
                 "--dtype", "float16", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [c["arch"] for c in report["compile"]] == ["sm_80", "sm_90a"] and all(c["ok"] for c in report["compile"])
    kernels = {(k["arch"], k["name"]): k for k in report["kernels"]}
    assert kernels[("sm_90a", "wmma_gemm")]["distinctive"]["wgmma"] is False
    assert kernels[("sm_80", "wmma_gemm")]["distinctive"]["mma"] is True
    assert [f["code"] for f in report["findings"]] == ["legacy-mma-on-hopper"]


@pytest.mark.skipif(not _has_nvcc(), reason="nvcc not installed")
def test_text_report(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(data_dir / "wmma.cu"), "--arch", "sm_90a", "--kernel", "scalar_copy",
                 "--dominant", "memory", "--dtype", "float32", "--threads", "256"]) == 0
    out = capsys.readouterr().out
    assert "scalar_copy  sm_90a" in out and "loads 32-bit x1" in out
    assert "sm_90a features used 0/5" in out
    assert "warning scalar-global-access" in out


def test_ptx_with_its_own_target(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(data_dir / "wgmma_serialized.ptx"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kernels"][0]["arch"] == "sm_90a"
    assert "wgmma-serialized" in {f["code"] for f in report["findings"]}


@pytest.mark.skipif(not _has_nvcc(), reason="nvcc not installed")
def test_compile_error_exits_1_with_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "broken.cu"
    source.write_text("__global__ void k(float* x) { x[0] = nope; }\n")
    assert main(["inspect", str(source), "--arch", "sm_80"]) == 1
    out = capsys.readouterr().out
    assert "FAILED to compile for sm_80" in out and "nope" in out


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "missing.cubin")]) == 2
    assert "does not exist" in capsys.readouterr().err
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert main(["inspect", str(text)]) == 2
    assert "cannot inspect notes.txt" in capsys.readouterr().err
    candidate = tmp_path / "candidate.py"
    candidate.write_text("class ModelNew: pass\n")
    assert main(["inspect", str(candidate)]) == 2
    assert "needs --problem" in capsys.readouterr().err
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    assert main(["inspect", str(source), "--arch", "sm_9z"]) == 2
    assert "'sm_9z' is not an arch name" in capsys.readouterr().err
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".version 8.0\n.target sm_90a\n.address_size 64\n")
    assert main(["inspect", str(ptx), "--executed"]) == 2
    assert "--executed needs a .py candidate" in capsys.readouterr().err


VERIFY = Path(__file__).resolve().parents[1] / "verify"


@pytest.mark.skipif(not _has_nvcc(), reason="ptxas/cuobjdump not installed")
def test_python_candidate_with_problem_static_and_executed(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A .py candidate is run through the verifier (the interpreter here), its kernels' SASS summarised, and with
    --executed ncu's counts joined to them by name (ncu's CSV faked: there is no GPU here). Run 41 found this path
    broken on the H200 (the typed Verdict's summaries were parsed again as JSON)."""
    from kernelwright.inspect import ncu

    seen: list[list[str]] = []

    def fake_run_ncu(program: list[str], **_: object) -> list[ncu.ExecutedKernel]:
        seen.append(program)
        return ncu.parse_raw_csv(RAW_SOFTMAX)

    monkeypatch.setattr(ncu, "run_ncu", fake_run_ncu)
    candidate, problem = VERIFY / "candidates" / "softmax_ok.py", VERIFY / "problems" / "softmax.py"
    assert main(["inspect", str(candidate), "--problem", str(problem), "--arch", "sm_90a", "--executed",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [k["name"] for k in report["kernels"]] == ["softmax_kernel"]
    assert report["kernels"][0]["arch"] == "sm_90a"
    assert seen and seen[0][-4:] == ["kernelwright.inspect.ncu_driver", str(candidate), "--problem", str(problem)]
    executed = report["executed"]["kernels"]
    assert [k["name"] for k in executed] == ["softmax_kernel"] and executed[0]["launches"] == 2
    # summed over the launches, and per launch
    assert executed[0]["duration_ns"] == 21_800 and executed[0]["duration_ns_per_launch"] == 10_900
    assert executed[0]["dram_bytes_per_launch"] == 2 * 16_777_216


RAW_SOFTMAX = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",\
"Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"
"","","","","","","","","","","","byte","byte","nsecond"
"0","1","python3","gpu0","softmax_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","16,777,216","16,777,216",\
"11,000"
"1","1","python3","gpu0","softmax_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","16,777,216","16,777,216",\
"10,800"
'''


@pytest.mark.skipif(not _has_nvcc(), reason="nvcc not installed")
def test_diff_shows_what_changed_from_a_to_b(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same kernel (by name) as scalar and as 128-bit loads: the diff names the load widths, the opcodes and
    the resources that moved, and the finding only one side has."""
    scalar, vector = tmp_path / "scalar.cu", tmp_path / "vector.cu"
    scalar.write_text('extern "C" __global__ void copy(const float* x, float* y, int n) {\n'
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i];\n}\n")
    vector.write_text('extern "C" __global__ void copy(const float4* x, float4* y, int n) {\n'
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n / 4) y[i] = x[i];\n}\n")
    args = ["inspect", str(scalar), "--diff", str(vector), "--arch", "sm_90a", "--dominant", "memory",
            "--dtype", "float32", "--threads", "256"]
    assert main([*args, "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)["diff"]
    (kernel,) = [d for d in diff if "a" in d]
    assert kernel["a"] == kernel["b"] == "copy" and kernel["arch"] == "sm_90a"
    assert kernel["load_bits"] == {"32": [1, 0], "128": [0, 1]}
    assert any(op.startswith("LDG") for op in kernel["opcodes"])
    assert {"findings": {"only_a": ["scalar-global-access"], "only_b": []}} in diff
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"A {scalar}" and "copy  sm_90a" in out
    assert "loads       128 0 -> 1 (+1), 32 1 -> 0 (-1)" in out or "loads       32 1 -> 0 (-1), 128 0 -> 1 (+1)" in out
    assert "only in A: scalar-global-access" in out


def test_diff_of_a_missing_file_is_one_line(tmp_path: Path) -> None:
    import argparse

    from kernelwright.errors import InputError
    from kernelwright.inspect.cli import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    (tmp_path / "a.ptx").write_text("")
    with pytest.raises(InputError, match="does not exist"):
        run(parser.parse_args([str(tmp_path / "a.ptx"), "--diff", str(tmp_path / "b.ptx")]))
