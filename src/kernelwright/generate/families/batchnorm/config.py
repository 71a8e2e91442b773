"""The batchnorm family's configuration: one record a configuration its space lists (generate/families/config.py)."""

from __future__ import annotations

from kernelwright.generate.families.config import FamilyConfig, family_config


@family_config
class BatchNormConfig(FamilyConfig):
    BLOCK: int  # elements a program step, in the statistics and the apply pass
    num_warps: int
