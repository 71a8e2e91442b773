"""The pointwise family's configuration: one record a configuration its space lists (generate/families/config.py)."""

from __future__ import annotations

from kernelwright.generate.families.config import FamilyConfig, family_config


@family_config
class PointwiseConfig(FamilyConfig):
    BLOCK: int  # result elements a program
    num_warps: int
