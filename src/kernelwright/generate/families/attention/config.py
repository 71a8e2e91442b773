"""The attention family's configuration: one record a configuration its space lists (generate/families/config.py)."""

from __future__ import annotations

from typing import Literal

from kernelwright.generate.families.config import FamilyConfig, family_config


@family_config
class AttentionConfig(FamilyConfig):
    BLOCK_M: int  # query rows a program
    BLOCK_N: int  # keys a step of the loop over the sequence
    num_warps: int
    num_stages: int
    input_precision: Literal["ieee", "tf32"] | None = None  # fp32 problems' dots (None: ieee)
    variant: Literal["pointer", "tma"] | None = None  # q, k and v by pointer (None) or TMA descriptors (Hopper)
