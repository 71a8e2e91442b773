"""Variant choice: exact arch, then the nearest older one it can run on, precision policy, then the reference."""

from __future__ import annotations

import pytest

from kernelwright.runtime.dispatch import VariantSpec, precision_allows, runs_on, select_variant


def variant(arch: str, precision: str = "highest", language: str = "triton") -> VariantSpec:
    digits = arch[3:].rstrip("af")
    suffix = {"highest": "", "high": "_tf32", "medium": "_reduced"}[precision]
    return VariantSpec(id=arch + suffix, arch=arch, capability=(int(digits[:-1]), int(digits[-1])),
                       language=language, precision=precision, file=f"_variants/{arch}{suffix}.py", state_map=None)


@pytest.mark.parametrize(("arch", "capability", "expected"), [
    ("sm_90a", (9, 0), True), ("sm_90a", (10, 0), False), ("sm_90a", (8, 9), False),
    ("sm_80", (8, 0), True), ("sm_80", (8, 6), True), ("sm_80", (9, 0), True), ("sm_80", (7, 5), False),
    ("sm_100f", (10, 3), True), ("sm_100f", (12, 0), False), ("sm_90", (12, 0), True),
])
def test_runs_on(arch: str, capability: tuple[int, int], expected: bool) -> None:
    assert runs_on(arch, capability) is expected


VARIANTS = [variant("sm_90a"), variant("sm_80"), variant("sm_80", "high")]


@pytest.mark.parametrize(("capability", "precision", "expected"), [
    ((9, 0), "highest", "sm_90a"),           # exact arch
    ((8, 6), "highest", "sm_80"),            # nearest older
    ((8, 9), "high", "sm_80_tf32"),          # TF32 allowed: the TF32 variant of the same arch
    ((10, 0), "highest", "sm_80"),           # sm_90a is arch-specific: not on Blackwell
    ((7, 5), "highest", None),               # nothing older: the reference
    (None, "highest", None),                 # the CPU: the reference
])
def test_select_variant(capability: tuple[int, int] | None, precision: str, expected: str | None) -> None:
    chosen = select_variant(VARIANTS, capability=capability, precision=precision)
    assert (chosen.id if chosen else None) == expected


def test_interpreter_runs_triton_variants_only() -> None:
    chosen = select_variant([variant("sm_90a", language="cuda"), variant("sm_80")], capability=None,
                            precision="highest", interpreted=True)
    assert chosen is not None and chosen.id == "sm_80"
    assert select_variant([variant("sm_90a", language="cuda")], capability=None, precision="highest",
                          interpreted=True) is None


def test_precision_order() -> None:
    assert precision_allows("highest", "high") and precision_allows("high", "medium")
    assert not precision_allows("high", "highest") and not precision_allows("medium", "high")
