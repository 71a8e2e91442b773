"""The ranking model: LightGBM's lambdarank over the candidates of each run (``pip install kernelwright[costmodel]``),
saved with the data it came from, and an evaluation that cannot flatter it.

Relevance labels grade each candidate by its median over its run's best: within 2% 4, 5% 3, 15% 2, 50% 1, else 0.
The evaluation holds out whole problems (leave-one-problem-out) or whole families (leave-one-family-out), trains
on the rest, and scores the held-out runs' orderings against two baselines on the same runs: the search's own
order (the order the templates list configurations in, what the tuner measures today) and random order
(expectations over every permutation, computed exactly). Per held-out run: Kendall's tau against the measured
order; top-1 (the first pick within 2% of the best); top-5 recall (the best, within 2%, among the first five); and
the measurements needed to reach within 5% of the best.
"""

from __future__ import annotations

import datetime
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.costmodel.data import Dataset, Row
from kernelwright.errors import InputError

TIE = 1.02  # "the best": within 2% of the run's fastest
NEAR = 1.05  # "within 5% of the best"
_GRADES = ((1.02, 4), (1.05, 3), (1.15, 2), (1.5, 1))


def _lightgbm() -> Any:
    try:
        import lightgbm
    except ImportError:
        raise InputError("the cost model needs LightGBM: pip install 'kernelwright[costmodel]' "
                         "(or pip install lightgbm)") from None
    return lightgbm


def relevance(rows: Sequence[Row]) -> list[int]:
    best = min(r.median_ms for r in rows)
    return [next((g for limit, g in _GRADES if r.median_ms <= limit * best), 0) for r in rows]


def _matrix(rows: Sequence[Row], names: Sequence[str]) -> Any:
    import numpy as np

    return np.array([[r.features.get(n, math.nan) for n in names] for r in rows], dtype=np.float64).reshape(
        len(rows), len(names))


@dataclass
class RankModel:
    booster: Any
    features: list[str]
    meta: dict[str, Any]

    def scores(self, rows: Sequence[Row]) -> list[float]:
        """Higher is predicted faster."""
        return [float(s) for s in self.booster.predict(_matrix(rows, self.features))]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(path))
        path.with_suffix(".json").write_text(json.dumps(self.meta, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> RankModel:
        lgb = _lightgbm()
        if not path.is_file():
            raise InputError(f"no cost model at {path}: train one with `kernelwright model train`")
        meta = json.loads(path.with_suffix(".json").read_text())
        return cls(booster=lgb.Booster(model_file=str(path)), features=list(meta["features"]), meta=meta)


def train(data: Dataset, *, seed: int = 0, rows: Sequence[Row] | None = None) -> RankModel:
    """A lambdarank model over ``rows`` (default: all of ``data``), grouped by run."""
    lgb = _lightgbm()
    chosen = list(rows if rows is not None else data.rows)
    groups: dict[str, list[Row]] = {}
    for row in chosen:
        groups.setdefault(row.group, []).append(row)
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if len(groups) < 2:
        raise InputError(f"too little data to train a cost model: {len(groups)} run(s) with two or more timed "
                         "candidates (bench or optimize on a GPU adds them)")
    names = data.feature_names()
    ordered = [r for g in groups.values() for r in g]
    labels = [label for g in groups.values() for label in relevance(g)]
    params = {"objective": "lambdarank", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 3,
              "min_data_in_bin": 1, "bagging_fraction": 0.9, "bagging_freq": 1, "feature_fraction": 0.9,
              "label_gain": [0, 1, 3, 7, 15], "seed": seed, "deterministic": True, "num_threads": 2,
              "verbose": -1}
    train_set = lgb.Dataset(_matrix(ordered, names), label=labels, group=[len(g) for g in groups.values()],
                            feature_name=list(names), free_raw_data=False)
    booster = lgb.train(params, train_set, num_boost_round=200)
    meta = {"features": names, "rows": len(ordered), "groups": len(groups), "data_digest": data.digest,
            "sources": list(data.sources), "trained": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "lightgbm": lgb.__version__, "problems": sorted({r.problem for r in ordered}),
            "families": sorted({f for r in ordered for f in r.family.split("+")})}
    return RankModel(booster=booster, features=names, meta=meta)


# -------------------------------------------------------------------------------------------------- evaluation


def kendall_tau(predicted: Sequence[float], measured_ms: Sequence[float]) -> float:
    """Kendall's tau-b between a predicted score (higher: faster) and measured times (lower: faster)."""
    concordant = discordant = ties_p = ties_m = 0
    n = len(predicted)
    for i in range(n):
        for j in range(i + 1, n):
            dp = predicted[i] - predicted[j]
            dm = measured_ms[j] - measured_ms[i]  # faster first: the same sense as the score
            if dp == 0 and dm == 0:
                continue
            if dp == 0:
                ties_p += 1
            elif dm == 0:
                ties_m += 1
            elif (dp > 0) == (dm > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_p) * (concordant + discordant + ties_m))
    return (concordant - discordant) / denominator if denominator else 0.0


def _order_metrics(ms_in_order: Sequence[float]) -> dict[str, float]:
    """Metrics of one measuring order (the times in the order the candidates would be measured)."""
    best = min(ms_in_order)
    first_near = next(i for i, ms in enumerate(ms_in_order, 1) if ms <= NEAR * best)
    return {"top1": float(ms_in_order[0] <= TIE * best),
            "top5": float(any(ms <= TIE * best for ms in ms_in_order[:5])),
            "measured_to_5pct": first_near / len(ms_in_order)}


def _random_expectation(ms: Sequence[float]) -> dict[str, float]:
    """The metrics' expectations over a uniformly random order, exactly (hypergeometric)."""
    n, best = len(ms), min(ms)
    ties = sum(m <= TIE * best for m in ms)
    near = sum(m <= NEAR * best for m in ms)

    def p_none_in_first(k: int, good: int) -> float:
        return math.comb(n - good, k) / math.comb(n, k) if k <= n - good else 0.0

    expected_first = sum(p_none_in_first(k, near) for k in range(n))  # E[first hit] = sum_k P(no hit in first k)
    return {"top1": ties / n, "top5": 1.0 - p_none_in_first(min(5, n), ties), "measured_to_5pct": expected_first / n,
            "tau": 0.0}


@dataclass(frozen=True)
class GroupResult:
    group: str
    problem: str
    family: str
    size: int
    model: dict[str, float]
    search_order: dict[str, float]
    random: dict[str, float]


def _score_group(rows: Sequence[Row], scores: Sequence[float]) -> GroupResult:
    ms = [r.median_ms for r in rows]
    by_model = [m for _, m in sorted(zip(scores, ms), key=lambda p: -p[0])]
    by_search = [r.median_ms for r in sorted(rows, key=lambda r: r.order)]
    model = {**_order_metrics(by_model), "tau": kendall_tau(scores, ms)}
    search = {**_order_metrics(by_search), "tau": kendall_tau([-r.order for r in rows], ms)}
    return GroupResult(group=rows[0].group, problem=rows[0].problem, family=rows[0].family, size=len(rows),
                       model=model, search_order=search, random=_random_expectation(ms))


def cross_validate(data: Dataset, by: str = "problem", *, seed: int = 0,
                   trainer: Callable[..., RankModel] = train) -> list[GroupResult]:
    """Hold out each problem (``by="problem"``) or family (``"family"``) in turn: train on the rest, score the
    held-out runs."""
    if by not in ("problem", "family"):
        raise ValueError(f"cross_validate by={by!r}: use 'problem' or 'family'")
    key = (lambda r: r.problem) if by == "problem" else (lambda r: r.family.split("+")[0])
    results: list[GroupResult] = []
    for held in sorted({key(r) for r in data.rows}):
        train_rows = [r for r in data.rows if key(r) != held]
        test_groups = {g: rows for g, rows in data.groups.items() if key(rows[0]) == held}
        try:
            model = trainer(data, seed=seed, rows=train_rows)
        except InputError:
            continue
        for rows in test_groups.values():
            results.append(_score_group(rows, model.scores(rows)))
    return results


def summarize(results: Sequence[GroupResult], *, min_size: int = 2) -> dict[str, Any]:
    """Means over the held-out runs of at least ``min_size`` candidates, per ordering."""
    chosen = [r for r in results if r.size >= min_size]
    out: dict[str, Any] = {"runs": len(chosen), "candidates": sum(r.size for r in chosen)}
    for name in ("model", "search_order", "random"):
        values = [getattr(r, name) for r in chosen]
        out[name] = {k: (sum(v[k] for v in values) / len(values) if values else math.nan)
                     for k in ("tau", "top1", "top5", "measured_to_5pct")}
    return out


def shuffled_control(data: Dataset, *, seed: int = 0) -> Dataset:
    """``data`` with each run's timings shuffled among its candidates: a model that learned something real does no
    better than random on it (the evaluation's own check)."""
    rng = random.Random(seed)
    rows: list[Row] = []
    for members in data.groups.values():
        times = [r.median_ms for r in members]
        rng.shuffle(times)
        rows += [Row(group=r.group, problem=r.problem, family=r.family, order=r.order, median_ms=t,
                     features=r.features) for r, t in zip(members, times)]
    return Dataset(rows=tuple(rows), sources=data.sources, digest=data.digest + ":shuffled")
