"""The knowledge base: every required GPU present with sane, sourced data; name lookup; arch lookup."""

from __future__ import annotations

import pytest

from kernelwright.errors import InputError
from kernelwright.hardware import (
    PEAK_KEYS,
    all_gpus,
    arch_spec,
    canonical_arch,
    compute_capability_of,
    lookup,
)

REQUIRED = ["V100", "T4", "A100 40GB", "A100 80GB SXM", "A10", "L4", "L40S", "RTX 4090", "H100 SXM", "H100 PCIe",
            "H200", "B200", "MI250X", "MI300X"]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_gpus_are_known_with_sourced_data(name: str) -> None:
    gpu = lookup(name)
    assert gpu.source.strip()
    assert gpu.sm_count > 0 and gpu.l2_bytes > 0 and gpu.memory_bandwidth_gbs > 0 and gpu.boost_clock_mhz > 0
    assert gpu.max_threads_per_block == 1024
    assert gpu.registers_per_sm >= 65536
    assert gpu.shared_memory_per_block_optin_bytes <= gpu.shared_memory_per_sm_bytes
    assert gpu.peak_tflops and set(gpu.peak_tflops) <= set(PEAK_KEYS)
    assert gpu.peak_tflops["fp32"] > 0
    # dense tensor-core rates are never below the SIMT fp32 rate on these parts
    for key in ("fp16", "bf16", "tf32"):
        if key in gpu.peak_tflops:
            assert gpu.peak_tflops[key] >= gpu.peak_tflops["fp32"]


def test_datasheet_values_of_a_few_rows() -> None:
    h100 = lookup("H100")
    assert (h100.name, h100.sm_count, h100.arch, h100.compute_capability) == ("H100 SXM", 132, "sm_90a", (9, 0))
    assert h100.peak_tflops["bf16"] == pytest.approx(989.4)
    assert h100.shared_memory_per_block_optin_bytes == 227 * 1024
    assert {"wgmma", "tma", "setmaxnreg", "dpx"} <= h100.features
    assert lookup("H200").memory_bandwidth_gbs == 4800
    a100 = lookup("a100-40gb")
    assert a100.shared_memory_per_block_optin_bytes == 163 * 1024 and "cp.async" in a100.features
    assert "wgmma" not in a100.features
    assert lookup("B200").arch == "sm_100a" and "tcgen05" in lookup("B200").features
    assert lookup("MI300X").compute_capability is None and lookup("MI300X").vendor == "amd"


@pytest.mark.parametrize("alias", ["H100", "h100-sxm", "NVIDIA H100 80GB HBM3", "  h100 sxm5 "])
def test_lookup_is_case_and_spacing_insensitive(alias: str) -> None:
    assert lookup(alias).name == "H100 SXM"


@pytest.mark.parametrize("alias,name", [("NVIDIA H200", "H200"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
                                        ("Tesla T4", "T4"), ("AMD Instinct MI300X", "MI300X"),
                                        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM")])
def test_lookup_accepts_device_names(alias: str, name: str) -> None:
    assert lookup(alias).name == name


def test_unknown_gpu_lists_close_matches() -> None:
    with pytest.raises(InputError) as info:
        lookup("H2000")
    message = str(info.value)
    assert "H2000" in message and "H200" in message and "\n" not in message


def test_every_gpu_arch_resolves() -> None:
    for gpu in all_gpus():
        assert arch_spec(gpu.arch).name == gpu.arch


@pytest.mark.parametrize("text,expected", [("sm_90a", "sm_90a"), ("SM90a", "sm_90a"), ("90a", "sm_90a"),
                                           ("9.0", "sm_90"), ("sm_100a", "sm_100a"), ("compute_80", "sm_80"),
                                           ("gfx942", "gfx942")])
def test_canonical_arch(text: str, expected: str) -> None:
    assert canonical_arch(text) == expected


def test_compute_capability_of() -> None:
    assert compute_capability_of("sm_90a") == (9, 0)
    assert compute_capability_of("sm_120") == (12, 0)
    assert compute_capability_of("sm_86") == (8, 6)


def test_arch_spec_limits_follow_gpu_facts() -> None:
    assert arch_spec("sm_75").max_blocks_per_sm == 16 and arch_spec("sm_86").max_blocks_per_sm == 16
    assert arch_spec("sm_89").max_blocks_per_sm == 24 and arch_spec("sm_120").max_blocks_per_sm == 24
    assert {arch_spec(a).max_blocks_per_sm for a in ("sm_70", "sm_80", "sm_90a", "sm_100a")} == {32}
    assert arch_spec("sm_80").reserved_shared_per_block_bytes == 1024
    assert arch_spec("sm_80").shared_alloc_unit_bytes == 128
    assert arch_spec("sm_90").features < arch_spec("sm_90a").features  # wgmma/setmaxnreg only with the 'a' target


def test_arch_fallbacks_and_errors() -> None:
    assert arch_spec("sm_87").name == "sm_87" and arch_spec("sm_87").max_threads_per_sm == 1536
    assert "tcgen05" in arch_spec("sm_100f").features
    with pytest.raises(InputError):
        arch_spec("sm_x")
    with pytest.raises(InputError):
        arch_spec("sm_50")
