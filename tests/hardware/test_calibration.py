"""Measured ceilings: the cache round trip (CPU) and a real measurement (GPU)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernelwright.config import config
from kernelwright.errors import ToolchainError
from kernelwright.hardware import calibration
from kernelwright.hardware.calibration import Ceilings, load_cached_ceilings, store_ceilings


def _ceilings(**overrides: object) -> Ceilings:
    base: dict = dict(device_name="NVIDIA H200", copy_gbs=4250.0, matmul_tflops={"bf16": 678.0, "tf32": 386.0,
                      "fp32": 51.0}, measured_at="2026-11-30T00:00:00+00:00", torch_version="2.11.0",
                      driver_version="570.1")
    base.update(overrides)
    return Ceilings(**base)


def test_cache_round_trip_keyed_by_device_driver_and_torch(tmp_path: Path) -> None:
    with config.scope(cache_dir=tmp_path):
        path = store_ceilings(_ceilings())
        assert path.parent == tmp_path / "calibration"
        loaded = load_cached_ceilings("NVIDIA H200", driver="570.1", torch_version="2.11.0")
        assert loaded == _ceilings()
        assert load_cached_ceilings("NVIDIA H200", driver="575.0", torch_version="2.11.0") is None
        assert load_cached_ceilings("NVIDIA H200", driver="570.1", torch_version="2.12.0") is None
        assert load_cached_ceilings("NVIDIA H100", driver="570.1", torch_version="2.11.0") is None


def test_malformed_cache_is_ignored(tmp_path: Path) -> None:
    with config.scope(cache_dir=tmp_path):
        path = store_ceilings(_ceilings())
        path.write_text("{not json")
        assert load_cached_ceilings("NVIDIA H200", driver="570.1", torch_version="2.11.0") is None


def test_json_round_trip() -> None:
    assert Ceilings.from_json(_ceilings().to_json()) == _ceilings()


def test_no_cuda_device_is_a_toolchain_error(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with config.scope(cache_dir=tmp_path), pytest.raises(ToolchainError, match="no CUDA device"):
        calibration.measured_ceilings()


@pytest.mark.gpu
def test_measured_ceilings_are_plausible_fast_and_cached(tmp_path: Path) -> None:
    from kernelwright.hardware import local_gpu

    with config.scope(cache_dir=tmp_path):
        started = time.perf_counter()
        ceilings = calibration.measured_ceilings(refresh=True)
        assert time.perf_counter() - started < 30
        spec = local_gpu()
        assert spec is not None
        assert 0.3 * spec.memory_bandwidth_gbs < ceilings.copy_gbs < 1.2 * spec.memory_bandwidth_gbs
        assert ceilings.matmul_tflops["fp32"] > 0
        if "bf16" in spec.peak_tflops:
            assert ceilings.matmul_tflops["bf16"] < 1.1 * spec.peak_tflops["bf16"]
            assert ceilings.matmul_tflops["tf32"] > ceilings.matmul_tflops["fp32"]
        assert calibration.measured_ceilings() == ceilings  # served from the cache
