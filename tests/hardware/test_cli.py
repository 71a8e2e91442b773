"""``kernelwright hw``."""

from __future__ import annotations

import json

import pytest

from kernelwright.cli import main


def test_named_gpu_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "H100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gpu"]["name"] == "H100 SXM" and report["gpu"]["peak_tflops"]["bf16"] == pytest.approx(989.4)
    assert report["arch"]["name"] == "sm_90a" and "wgmma" in report["arch"]["features"]
    assert report["ceilings"] is None  # not a live device


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("V100 SXM2", "A100 40GB", "RTX 4090", "H200", "B200", "MI300X"):
        assert name in out
    assert main(["hw", "--list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) >= 14


def test_unknown_gpu_exits_2_with_close_matches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "H2000"]) == 2
    err = capsys.readouterr().err
    assert "close matches" in err and "H200" in err and "Traceback" not in err


def test_occupancy_for_an_arch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "sm_80", "--threads", "128", "--registers", "32", "--shared", "48K", "--json"]) == 0
    occ = json.loads(capsys.readouterr().out)["occupancy"]
    assert (occ["blocks_per_sm"], occ["limiting"]) == (3, "shared_memory")


def test_local_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert main(["hw"]) == 0
    assert capsys.readouterr().out.startswith("no GPU:")
    assert main(["hw", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] is None
    assert main(["hw", "--calibrate"]) == 2


def test_launch_details_without_threads_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "sm_90a", "--registers", "64"]) == 2
    assert "--threads" in capsys.readouterr().err
