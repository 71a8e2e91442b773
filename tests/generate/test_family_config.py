"""A family's configuration is a typed record validated where it is made (generate/families/config.py), and still
the mapping of its set fields for what lists or stores configurations."""

from __future__ import annotations

import pytest

from kernelwright.errors import ConfigError
from kernelwright.generate.families.pool.config import PoolConfig
from kernelwright.generate.families.recurrent.config import RecurrentConfig
from kernelwright.generate.families.scan.config import ScanConfig


def test_a_bad_configuration_is_refused_where_it_is_made():
    with pytest.raises(ConfigError, match="variant='diag' is not one of 'lanes', 'rows'"):
        PoolConfig(variant="diag", BLOCK=128, num_warps=4)
    with pytest.raises(ConfigError, match="BLOCK=-1"):
        ScanConfig(BLOCK=-1, num_warps=4)
    with pytest.raises(ConfigError, match="BLOCK=True"):
        ScanConfig(BLOCK=True, num_warps=4)  # a bool is not a tile size
    with pytest.raises(ConfigError, match="split='yes' is not true or false"):
        RecurrentConfig(BLOCK_B=16, BLOCK_H=16, BLOCK_K=64, num_warps=4, split="yes")
    with pytest.raises(TypeError):
        ScanConfig(BLOCK=1024)  # num_warps is required


def test_a_dict_becomes_the_record_and_an_unknown_setting_is_named():
    config = ScanConfig.of({"BLOCK": 2048, "COLS": 32, "num_warps": 4, "stages": 3})
    assert config.BLOCK == 2048 and config.stages == 3 and ScanConfig.of(config) is config
    with pytest.raises(ConfigError, match=r"ScanConfig has no setting 'split_k' \(its settings: BLOCK, COLS"):
        ScanConfig.of({"BLOCK": 2048, "num_warps": 4, "split_k": 2})


def test_the_record_reads_as_the_mapping_of_its_set_fields_in_field_order():
    rows = PoolConfig(variant="rows", BLOCK=128, num_warps=4)
    lanes = PoolConfig(BLOCK=512, num_warps=4)
    assert list(rows.items()) == [("variant", "rows"), ("BLOCK", 128), ("num_warps", 4)]
    assert dict(lanes) == {"BLOCK": 512, "num_warps": 4} and "variant" not in lanes
    assert lanes.get("variant", "lanes") == "lanes" and len(lanes) == 2
    assert lanes == {"BLOCK": 512, "num_warps": 4} and {**lanes, "num_warps": 8} == lanes.replace(num_warps=8)
    assert len({lanes, PoolConfig(BLOCK=512, num_warps=4), rows}) == 2  # hashable, equal where the fields are
    with pytest.raises(KeyError):
        lanes["variant"]
    with pytest.raises(ConfigError):
        lanes.replace(variant="diag")


def test_a_convolution_variant_refuses_a_record_without_its_settings():
    from kernelwright.generate.families.conv.config import ConvConfig

    assert ConvConfig(variant="library", BLOCK=1024, num_warps=4)["variant"] == "library"
    with pytest.raises(ConfigError, match="variant 'implicit_gemm' needs layout, precision"):
        ConvConfig(variant="implicit_gemm", BLOCK_M=64, BLOCK_N=64, BLOCK_K=16, num_warps=4, num_stages=2)
    with pytest.raises(ConfigError, match="'winograd' is not one of"):
        ConvConfig(variant="winograd", BLOCK=1024, num_warps=4)  # once rendered as an implicit GEMM, silently


def test_every_typed_family_lists_its_own_records(tmp_path):
    """Over suite problems of the typed families: each configuration a space lists is its record (not a dict)."""
    from pathlib import Path

    from kernelwright.generate.families.config import FamilyConfig
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan

    typed = {"pointwise", "batchnorm", "pool", "scan", "recurrent", "attention", "gemm", "conv"}
    families = {f.name: f for f in load_families()}
    problems = Path(__file__).resolve().parents[2] / "problems"
    seen = set()
    for name in ("gelu_mul", "matmul_fp32", "bmm_fp16", "conv2d_bias_relu", "conv2d_bn_relu_bf16", "cumsum_dim1",
                 "attention_sdpa_bf16"):
        the_plan = plan(capture(problems / f"{name}.py"))
        for group in the_plan.groups:
            if group.family in typed:
                space = families[group.family].space(the_plan.graph, group, "sm_90a")
                assert all(isinstance(c, FamilyConfig) for c in space), (name, group.family)
                seen.add(group.family)
    assert seen >= {"pointwise", "gemm", "conv", "scan", "attention"}
