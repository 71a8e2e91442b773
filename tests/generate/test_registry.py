"""Template families register themselves where they are defined (generate/families/registry.py): one folder a
family, its claim priority an attribute, and a family that cannot be used is an error that names it."""

from __future__ import annotations

import importlib

import pytest

from kernelwright.costmodel.features import candidate_features
from kernelwright.generate.families import registry
from kernelwright.generate.plan import load_families

# The claim order the planner has always used: the families whose anchors bound a problem first, pointwise last.
CLAIM_ORDER = ["attention", "gemm", "conv", "reduction", "scan", "pool", "batchnorm", "recurrent", "pointwise"]


def test_every_family_folder_registers_its_family_in_the_claim_order():
    assert sorted(registry.family_names()) == sorted(CLAIM_ORDER)
    assert [f.name for f in load_families()] == CLAIM_ORDER
    assert [f.name for f in load_families(["pointwise", "gemm"])] == ["gemm", "pointwise"]
    priorities = [cls.priority for cls in registry.family_classes()]
    assert priorities == sorted(priorities) and len(set(priorities)) == len(priorities)


def test_the_cost_model_has_a_feature_for_each_registered_family():
    features = candidate_features("def kw_gemm_0(a, b):\n    pass\n")
    assert {k.removeprefix("family_") for k in features if k.startswith("family_")} == set(registry.family_names())
    assert features["family_gemm"] == 1.0 and features["family_conv"] == 0.0


def test_a_family_that_fails_to_import_is_an_error_that_names_it(monkeypatch):
    real = importlib.import_module

    def broken(name, *args, **kwargs):
        if name.endswith(".families.scan"):
            raise ImportError("no module named 'triton.language.extra'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(registry.importlib, "import_module", broken)
    with pytest.raises(registry.FamilyError) as caught:
        load_families()
    message = str(caught.value)
    assert "'scan'" in message and "triton.language.extra" in message and "\n" not in message


def test_a_family_folder_that_registers_nothing_is_an_error(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTERED", {k: v for k, v in registry._REGISTERED.items() if k != "pool"})
    with pytest.raises(registry.FamilyError, match="registers no family named 'pool'"):
        registry.family_classes()


def test_a_family_needs_a_name_and_a_priority_and_names_are_unique():
    with pytest.raises(TypeError, match="int `priority`"):
        @registry.register
        class NoPriority:
            name = "nothing"

    with pytest.raises(TypeError, match="taken"):
        @registry.register
        class Impostor:
            name = "gemm"
            priority = 1
