"""What the cost model knows about a candidate before it is timed: read from its source (the launch configuration
the templates wrote: tiles, warps, stages, the variant's marks) and from its problem (the roofline's bytes and
FLOPs, what bounds it), with the arch. Nothing here runs or compiles the candidate.

A feature that a candidate does not have (a pointwise kernel has no BLOCK_K) is NaN: the trees treat it as missing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from kernelwright.generate.families.registry import family_names

# Launch keywords and launcher constants that configure a kernel: tiles, warps, stages, grouping, K shares.
_CONFIG_KEY = re.compile(r"^(BLOCK(_[A-Z0-9]+)?|GROUP_[A-Z]|num_warps|num_stages|split_k|SPLIT_?[A-Z]*|ROWS|COLS)$")
_KEYWORD = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+)\b")
_FAMILY = re.compile(r"\bdef kw_([a-z]+)_\d+\(")

# Marks of a template's variant in its source, each a 0/1 feature.
MARKS = {
    "tma": "TensorDescriptor",
    "warp_specialize": "warp_specialize=True",
    "tf32x3": 'input_precision="tf32x3"',
    "tf32": 'input_precision="tf32"',
    "ieee_dot": 'input_precision="ieee"',
    "k_major_copy": "_k_major(",
    "split_k": "_splitk_epilogue",
    "persistent": "_sm_count(",
    "cuda_cpp": "load_inline",
    "channels_last": "channels_last",
    "atomic": "tl.atomic_",
    "ptx_rewrite": "add_stages_inspection_hook",  # its kernels' PTX rewritten (generate/ptx_variant.py)
}

BOUNDS = ("compute", "memory")


def config_values(source: str) -> dict[str, float]:
    """The configuration integers of a candidate's launches (the largest where several kernels set one)."""
    values: dict[str, float] = {}
    for match in _KEYWORD.finditer(source):
        key, number = match.group(1), int(match.group(2))
        if _CONFIG_KEY.match(key):
            values[key] = max(values.get(key, 0), number)
    return values


def candidate_features(source: str, problem: Mapping[str, Any] | None = None, arch: str = "") -> dict[str, float]:
    """The features of one candidate: its configuration, variant marks, kernel count and family, its problem's
    roofline (``problem``: the verifier's ``roofline`` record) and the arch's generation."""
    config = config_values(source)
    blocks = [v for k, v in config.items() if k.startswith("BLOCK")]
    features: dict[str, float] = {f"cfg_{k}": float(v) for k, v in config.items()}
    features["tile_log2"] = math.log2(math.prod(blocks)) if blocks else math.nan
    features["kernels"] = float(source.count("@triton.jit") + source.count("__global__"))
    for name, text in MARKS.items():
        features[f"mark_{name}"] = float(text in source)
    families = set(_FAMILY.findall(source))
    for family in family_names():  # one a family folder (generate/families/registry.py)
        features[f"family_{family}"] = float(family in families)
    roofline = problem or {}
    flops, nbytes = roofline.get("flops"), roofline.get("bytes")
    features["problem_log_flops"] = math.log10(flops) if flops else math.nan
    features["problem_log_bytes"] = math.log10(nbytes) if nbytes else math.nan
    features["problem_intensity"] = (flops / nbytes) if flops and nbytes else math.nan
    features["problem_compute_bound"] = float(roofline.get("bound") == "compute") if roofline else math.nan
    digits = re.search(r"sm_(\d+)", arch or "")
    features["arch_sm"] = float(digits.group(1)) if digits else math.nan
    if features.get("cfg_num_warps") and not math.isnan(features["tile_log2"]):
        features["tile_per_warp_log2"] = features["tile_log2"] - math.log2(features["cfg_num_warps"])
    return features


def families_of(source: str) -> tuple[str, ...]:
    """The template families a candidate's launchers come from (``def kw_gemm_0(``: gemm)."""
    return tuple(sorted(set(_FAMILY.findall(source))))
