"""The occupancy calculator against hand-worked cases (rules: GPU_FACTS.md, "Occupancy")."""

from __future__ import annotations

import pytest

from kernelwright.errors import InputError
from kernelwright.hardware import lookup, occupancy, validate_launch


def test_hopper_register_limited() -> None:
    # 8 warps/block; 128 regs x 32 = 4096 per warp -> floor(16384/4096)=4 per sub-partition -> 16 warps -> 2 blocks.
    # Shared: 65536 + 1024 reserved -> floor(233472 / 66560) = 3 blocks. Warps: 64/8 = 8.
    occ = occupancy("sm_90a", threads_per_block=256, registers_per_thread=128, shared_bytes_per_block=65536)
    assert occ.limits == {"blocks": 32, "warps": 8, "registers": 2, "shared_memory": 3}
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiting) == (2, 16, "registers")
    assert occ.occupancy == pytest.approx(0.25)


def test_ampere_full_occupancy_is_warp_limited() -> None:
    # 4 warps; 32 regs -> 1024/warp -> 16 per sub-partition -> 64 warps -> 16 blocks; warps 64/4 = 16 (tie).
    occ = occupancy("sm_80", threads_per_block=128, registers_per_thread=32, shared_bytes_per_block=0)
    assert (occ.blocks_per_sm, occ.occupancy, occ.limiting) == (16, 1.0, "warps")
    assert occ.limits["shared_memory"] == 164  # only the 1 KiB reserved per block counts


def test_ampere_shared_memory_limited() -> None:
    # 48 KiB + 1 KiB reserved = 50176 B -> floor(167936 / 50176) = 3 blocks
    occ = occupancy("sm_80", threads_per_block=128, registers_per_thread=32, shared_bytes_per_block=48 * 1024)
    assert (occ.blocks_per_sm, occ.limiting, occ.warps_per_sm) == (3, "shared_memory", 12)


def test_register_rounding_to_256_per_warp() -> None:
    # 37 regs x 32 = 1184 -> 1280 per warp -> floor(16384/1280) = 12 -> 48 warps -> 6 blocks of 8 warps;
    # sm_75 has 32 warp slots -> 4 blocks, warp limited
    occ = occupancy("sm_75", threads_per_block=256, registers_per_thread=37, shared_bytes_per_block=0)
    assert occ.limits["registers"] == 6 and occ.limits["warps"] == 4
    assert (occ.blocks_per_sm, occ.limiting, occ.occupancy) == (4, "warps", 1.0)


def test_partial_warps_and_max_registers() -> None:
    # 96 threads = 3 warps; 255 regs -> 8192 per warp -> 2 per sub-partition -> 8 warps -> 2 blocks
    occ = occupancy("sm_90", threads_per_block=96, registers_per_thread=255, shared_bytes_per_block=0)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiting) == (2, 6, "registers")
    assert occ.occupancy == pytest.approx(6 / 64)


def test_ada_block_slots_and_warp_slots() -> None:
    # sm_89: 48 warp slots, 24 blocks; 32-thread blocks with few registers are limited by the 24 block slots
    occ = occupancy("sm_89", threads_per_block=32, registers_per_thread=16, shared_bytes_per_block=0)
    assert (occ.blocks_per_sm, occ.limiting) == (24, "blocks")
    assert occ.occupancy == pytest.approx(24 / 48)


def test_volta_shared_granularity_is_256_without_reservation() -> None:
    # 33000 B -> 33024 (256-byte units), no reserved KiB on sm_70 -> floor(98304 / 33024) = 2
    occ = occupancy("sm_70", threads_per_block=128, registers_per_thread=32, shared_bytes_per_block=33000)
    assert occ.limits["shared_memory"] == 2


def test_gpu_spec_uses_its_own_shared_memory() -> None:
    occ = occupancy(lookup("A10"), threads_per_block=256, registers_per_thread=64, shared_bytes_per_block=40 * 1024)
    # 100 KiB per SM / (40 KiB + 1 KiB) = 2 blocks; registers 2048/warp -> 8 -> 32 warps -> 4 blocks
    assert (occ.blocks_per_sm, occ.limiting) == (2, "shared_memory")


def test_configuration_that_cannot_launch() -> None:
    occ = occupancy("sm_80", threads_per_block=1024, registers_per_thread=255, shared_bytes_per_block=200 * 1024)
    assert occ.blocks_per_sm == 0 and occ.limiting == "launch"
    assert len(occ.problems) == 2  # registers per block, shared memory above the opt-in


def test_validate_launch_names_each_problem() -> None:
    assert validate_launch("sm_90a", threads_per_block=256, registers_per_thread=128,
                           shared_bytes_per_block=100_000) == []
    problems = validate_launch("sm_80", threads_per_block=2048, shared_bytes_per_block=170_000,
                               features=("wgmma", "cp.async"))
    text = " | ".join(problems)
    assert "2048 threads per block exceed the 1024" in text
    assert "opt-in limit of 166912 bytes" in text
    assert "sm_80 has no wgmma" in text and "sm_90a" in text
    assert len(problems) == 3  # cp.async exists on sm_80
    assert any("unless compiled for the arch-specific target sm_90a" in p
               for p in validate_launch("sm_90", threads_per_block=128, features=("wgmma",)))
    assert validate_launch("sm_75", threads_per_block=128, registers_per_thread=300)[0].startswith("300 registers")


def test_amd_occupancy_is_refused_clearly() -> None:
    with pytest.raises(InputError, match="not modelled"):
        occupancy("gfx942", threads_per_block=256, registers_per_thread=32, shared_bytes_per_block=0)


def test_feature_names_are_checked_and_blackwell_wgmma_explained() -> None:
    with pytest.raises(InputError, match="unknown feature name"):
        validate_launch("sm_80", threads_per_block=128, registers_per_thread=32, shared_bytes_per_block=0,
                        features=("bogus",))
    problems = validate_launch("sm_100a", threads_per_block=128, registers_per_thread=32, shared_bytes_per_block=0,
                               features=("wgmma",))
    assert problems and "tcgen05" in problems[0] and "or later" not in problems[0]
