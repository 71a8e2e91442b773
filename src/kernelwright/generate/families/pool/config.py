"""The pool family's configuration: one record a configuration its space lists (generate/families/config.py)."""

from __future__ import annotations

from typing import Literal

from kernelwright.generate.families.config import FamilyConfig, family_config


@family_config
class PoolConfig(FamilyConfig):
    variant: Literal["lanes", "rows"] | None = None  # None: lanes (an output a lane, its window a loop)
    BLOCK: int  # output elements a program
    num_warps: int
