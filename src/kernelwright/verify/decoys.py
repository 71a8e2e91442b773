"""Decoys — protocol rule 9; integrity #2.

If zeros, a constant or a copy of an input passes a problem's check, the problem cannot tell a real kernel from a
trivial one (its true output is ~0, constant, or its input). Decoys are judged with the same comparison as
candidates, on two trials, once per problem and tolerance; the answer is cached.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import torch

from kernelwright import signed
from kernelwright.config import config
from kernelwright.verify import compare, tensors

log = logging.getLogger(__name__)


def _decoys(native: list[torch.Tensor], ref64: list[torch.Tensor] | None,
            inputs: list[Any]) -> dict[str, list[torch.Tensor]]:
    out: dict[str, list[torch.Tensor]] = {
        "zeros": [torch.zeros_like(o) for o in native],
    }
    truth = ref64 if ref64 is not None else native
    out["constant"] = [
        torch.full_like(o, float(t.double().nan_to_num().mean())) if o.is_floating_point() else torch.zeros_like(o)
        for o, t in zip(native, truth)
    ]
    for k, value in enumerate(inputs):
        if not isinstance(value, torch.Tensor):
            continue
        candidate = []
        for o in native:
            if value.numel() == o.numel():
                candidate.append(value.reshape(o.shape).to(o.dtype))
            else:
                break
        if len(candidate) == len(native):
            out[f"input {k}"] = candidate
    return out


def degenerate_decoys(problem_sha256: str, refs: dict[int, dict[str, Any]], shared: Path, *, mode: str,
                      factor: float, seed: int, allowed_unit_roundoff: float = 0.0,
                      size_overrides: dict[str, int] | None = None, device: str = "cpu") -> list[str]:
    """Names of the decoys that pass (empty: the problem is not degenerate). Cached per problem, tolerance and
    the sizes it was checked at."""
    sizes = ",".join(f"{k}={v}" for k, v in sorted((size_overrides or {}).items()))
    sizes_key = hashlib.sha256(sizes.encode()).hexdigest()[:12] if sizes else "as-written"
    key = f"{problem_sha256[:32]}-{mode}-{factor:g}-{allowed_unit_roundoff:g}-{sizes_key}"
    cache = Path(config.cache_dir) / "decoys" / f"{key}.json"
    cached = signed.read(cache, key)  # an entry a candidate's helper rewrote fails its digest (integrity #33)
    if cached is not None and isinstance(cached.get("passing"), list):
        return [str(name) for name in cached["passing"]]
    indices = [i for i in sorted(refs) if (shared / f"inputs-{i}.pt").exists()][:2]
    if not indices:
        return []
    passing: set[str] | None = None
    for index in indices:
        ref = refs[index]
        inputs = tensors.load(shared / f"inputs-{index}.pt")
        fp64 = ref.get("fp64")
        ok_here = set()
        for name, outputs in _decoys(ref["native"], fp64, inputs).items():
            if all(compare.compare(g, e, fp64[j] if fp64 else None, mode=mode, factor=factor,
                                   allowed_unit_roundoff=allowed_unit_roundoff, device=device).ok
                   for j, (g, e) in enumerate(zip(outputs, ref["native"]))):
                ok_here.add(name)
        passing = ok_here if passing is None else passing & ok_here
    result = sorted(passing or ())
    signed.write(cache, key, {"passing": result, "seed": seed})
    return result
