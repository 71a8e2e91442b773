"""What the families read about the target arch: the SM count from the hardware knowledge base, with one fallback."""

from __future__ import annotations

from kernelwright.generate.families.base import FALLBACK_SM_COUNT, sm_count


def test_sm_count_is_the_knowledge_base_largest_gpu_of_the_arch() -> None:
    assert sm_count("sm_90a") == 132  # H100 SXM and H200 (the H100 PCIe has 114)
    assert sm_count("sm_80") == 108  # A100
    assert sm_count("sm_87") == FALLBACK_SM_COUNT  # an arch the knowledge base lists no GPU of
