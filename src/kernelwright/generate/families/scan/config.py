"""The scan family's configuration: one record a configuration its space lists (generate/families/config.py)."""

from __future__ import annotations

from kernelwright.generate.families.config import FamilyConfig, family_config


@family_config
class ScanConfig(FamilyConfig):
    BLOCK: int  # the tile in elements (narrowed to the row and packed with short rows by the launcher)
    COLS: int | None = None  # inner-dimension scans: neighbouring columns a program
    num_warps: int
    stages: int | None = None  # the loop's pipeline depth (base.loop_header)
