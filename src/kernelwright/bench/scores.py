"""The bench's scores over its rows: KernelBench's fast_p and geomean, a speed-of-light score, and the counts a
reader checks first (how many ran, passed, were exploits).

- ``fast_0``: the share of problems whose kernel passed the verifier (correct, and no integrity finding). Every
  problem counts in the denominator, those that failed, were refused or were not run included.
- ``fast_p`` against a baseline: the share of problems that passed *and* ran more than ``p`` times faster than that
  baseline (KernelBench's fast_p, at p = 1.0, 1.5, 2.0; also the curve over p for the report).
- geomean speedup against a baseline: over the passed, timed problems with that baseline's timing.
- SOL score: the mean over passed, timed problems of how much of the gap between eager PyTorch and the achievable
  floor the kernel closes (0 = no faster than eager, 1 = at the floor; after SOL-ExecBench).
An exploit (a ``rejected`` verdict) is a failure like any other, named by its finding.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kernelwright.bench.rows import BASELINES

P_VALUES = (1.0, 1.5, 2.0)


def _passed(row: Mapping[str, Any]) -> bool:
    return row.get("status") == "passed"


def fast_p(rows: Sequence[Mapping[str, Any]], baseline: str, p: float) -> float | None:
    """Share of all rows that passed with a speedup over ``baseline`` above ``p``; None when nothing was timed
    against that baseline (a CPU bench), since 0 would read as "all slow"."""
    if not rows or not any((r.get("speedup") or {}).get(baseline) for r in rows):
        return None
    hits = sum(1 for r in rows if _passed(r) and ((r.get("speedup") or {}).get(baseline) or 0.0) > p)
    return hits / len(rows)


def geomean(values: Iterable[float]) -> float | None:
    logs = [math.log(v) for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(logs) / len(logs)) if logs else None


def fast_p_curve(rows: Sequence[Mapping[str, Any]], baseline: str, ps: Sequence[float]) -> list[float | None]:
    return [fast_p(rows, baseline, p) for p in ps]


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    passed = [r for r in rows if _passed(r)]
    timed = [r for r in passed if r.get("timed")]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[str(r.get("status"))] = statuses.get(str(r.get("status")), 0) + 1
    sols = [r["sol_score"] for r in timed if r.get("sol_score") is not None]
    floors = [r["percent_of_floor"] for r in timed if r.get("percent_of_floor") is not None]
    return {
        "problems": len(rows),
        "passed": len(passed),
        "timed": len(timed),
        "fast_0": len(passed) / len(rows) if rows else None,
        "fast_p": {b: {f"{p:g}": fast_p(rows, b, p) for p in P_VALUES} for b in BASELINES},
        "geomean_speedup": {b: geomean((r.get("speedup") or {}).get(b) or 0.0 for r in timed) for b in BASELINES},
        "sol_score": sum(sols) / len(sols) if sols else None,
        "median_percent_of_floor": sorted(floors)[len(floors) // 2] if floors else None,
        "statuses": dict(sorted(statuses.items())),
        "exploits": sorted((r["name"], ", ".join(r.get("findings") or [])) for r in rows if r.get("exploit")),
        "matmul_without_tensor_cores": sorted(r["name"] for r in timed
                                              if r.get("matmul_dominant") and not r.get("tensor_core")),
        "partly_in_pytorch": sorted(r["name"] for r in rows if r.get("uncovered")),
        # Rows with a verdict whose baselines are not all timed yet (kernelwright bench --resume fills them)
        "pending": {b: sorted(r["name"] for r in rows if b in (r.get("pending") or ())) for b in BASELINES},
    }
