"""The recurrent family's configuration: one record a configuration its space lists (generate/families/config.py)."""

from __future__ import annotations

from kernelwright.generate.families.config import FamilyConfig, family_config


@family_config
class RecurrentConfig(FamilyConfig):
    BLOCK_B: int  # batch rows a program
    BLOCK_H: int  # hidden units a program (split)
    BLOCK_K: int  # the reduction tile of a step's products
    num_warps: int
    split: bool  # a batch block's hidden units shared by several programs meeting at a barrier each step
    resident: bool | None = None  # a split program holding its W_hh block in registers for every step
