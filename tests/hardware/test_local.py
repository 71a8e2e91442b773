"""The local GPU: knowledge-base rows matched by device name, with live properties overriding."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelwright.hardware import local_gpu, spec_from_properties
from kernelwright.hardware.local import arch_for_capability, match_device


def _props(**overrides: object) -> SimpleNamespace:
    # what torch.cuda.get_device_properties reported on the project's H200 (GPU_FACTS.md)
    base = dict(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132, L2_cache_size=60 * 2**20,
                shared_memory_per_block_optin=232448, shared_memory_per_multiprocessor=233472,
                regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, total_memory=150_000_000_000)
    base.update(overrides)
    return SimpleNamespace(**base)


def test_known_device_keeps_datasheet_peaks_and_takes_live_properties() -> None:
    spec = spec_from_properties(_props(multi_processor_count=120, L2_cache_size=40 * 2**20))
    assert spec.name == "H200" and spec.live
    assert spec.sm_count == 120 and spec.l2_bytes == 40 * 2**20  # live values win
    assert spec.peak_tflops["bf16"] == pytest.approx(989.4) and spec.memory_bandwidth_gbs == 4800
    assert spec.arch == "sm_90a" and spec.compute_capability == (9, 0)


def test_device_name_matched_by_substring_and_sm_count() -> None:
    assert match_device("NVIDIA H100 PCIe", (9, 0), 114).name == "H100 PCIe"
    # the longest name contained in the device's name wins ("h100pcie" over "h100")
    assert match_device("NVIDIA H100 PCIe 96GB HBM2e", (9, 0), 114).name == "H100 PCIe"
    # among equally good textual matches, the row with the device's SM count wins
    assert match_device("NVIDIA H200 NVL-ish", (9, 0), 132).name == "H200"
    assert match_device("NVIDIA A100 something", (8, 0), 108).name.startswith("A100")
    # the compute capability must agree
    assert match_device("NVIDIA H100 lookalike", (8, 0), 108) is None
    assert match_device("Mystery Accelerator", (9, 0), 100) is None


def test_unknown_device_is_built_from_properties_without_peaks() -> None:
    spec = spec_from_properties(_props(name="NVIDIA Future GPU", major=12, minor=0, multi_processor_count=170,
                                       memory_clock_rate=14_000_000, memory_bus_width=512))
    assert spec.name == "NVIDIA Future GPU" and spec.peak_tflops == {}
    assert spec.arch.startswith("sm_120") and spec.max_blocks_per_sm == 24
    assert spec.memory_bandwidth_gbs == pytest.approx(2 * 14e9 * 512 / 8 / 1e9)


def test_arch_for_capability_prefers_arch_specific_targets() -> None:
    assert arch_for_capability(9, 0) == "sm_90a"
    assert arch_for_capability(10, 0) == "sm_100a"
    assert arch_for_capability(8, 0) == "sm_80"


def test_local_gpu_is_none_without_cuda() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert local_gpu() is None


@pytest.mark.gpu
def test_local_gpu_on_a_gpu_machine() -> None:
    spec = local_gpu()
    assert spec is not None and spec.live and spec.sm_count > 0 and spec.l2_bytes > 0
