"""The cost model in the search: a group's alternative configurations ordered by the model, the top part measured
plus an explorer, before the tuner times them; and in the LLM loop's template mutations (hybrid runs, ``evolve``),
the most promising untried configuration of the mutated group first.

Used only where it can help: a trained model exists (``kernelwright model train``), LightGBM imports, and the
model's data include the group's family — on a family it never saw it ordered worse than the templates' own order
(docs/costmodel.md: leave-one-family-out tau 0.25 against 0.38), so such a group keeps the search order. Anything
else (no model, a model that will not load) is the plain order with one line on the log, never a failed search.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelwright.costmodel.data import Row
from kernelwright.costmodel.features import candidate_features

log = logging.getLogger(__name__)

KEEP_SHARE = 0.5  # the model's top half of a group's alternatives is measured ...
KEEP_MIN = 3  # ... at least this many ...
EXPLORERS = 1  # ... and the first of the rest in the templates' order (the measured leads come first there)


class SearchRanker:
    def __init__(self, model: Any, arch: str) -> None:
        self.model, self.arch = model, arch
        self.families = set(model.meta.get("families") or ())

    def best_first(self, sources: Sequence[str], family: str) -> list[int] | None:
        """The positions of ``sources`` (one group's configurations, in the space's order), the model's most
        promising first; None for a family the model has no data for."""
        if family not in self.families:
            return None
        n = len(sources)
        rows = []
        for rank, source in enumerate(sources):
            features = candidate_features(source, None, self.arch)
            features["search_rank"] = float(rank + 1)  # the default (rank 0 in a run) is timed beside them
            features["search_rank_share"] = (rank + 1) / max(n, 1)
            rows.append(Row(group="search", problem="", family=family, order=rank, median_ms=math.nan,
                            features=features))
        scores = self.model.scores(rows)
        return [i for _, i in sorted(zip(scores, range(n)), key=lambda t: (-t[0], t[1]))]

    def order(self, candidates: Sequence[Any], family: str) -> list[Any]:
        """``candidates`` (one group's alternatives, in the space's order) as the tuner should time them: the
        model's top part, then explorers; unchanged for a family the model has no data for, or too few to
        choose from."""
        if family not in self.families or len(candidates) <= KEEP_MIN:
            return list(candidates)
        positions = self.best_first([Path(c.path).read_text() for c in candidates], family) or []
        ranked = [candidates[i] for i in positions]
        keep = max(KEEP_MIN, math.ceil(KEEP_SHARE * len(candidates)))
        chosen = ranked[:keep]
        explorers = [c for c in candidates if c not in chosen][:EXPLORERS]
        return chosen + explorers


def search_ranker(arch: str, *, enabled: bool = True, path: Path | None = None) -> SearchRanker | None:
    """The ranker for a search on ``arch``, or None (``--no-model``, no model trained, LightGBM missing)."""
    if not enabled:
        return None
    from kernelwright.costmodel.cli import default_model_path
    from kernelwright.errors import InputError

    path = path or default_model_path()
    if not path.is_file():
        return None
    try:
        from kernelwright.costmodel.model import RankModel

        return SearchRanker(RankModel.load(path), arch)
    except (InputError, OSError, ValueError, KeyError) as exc:
        log.warning("the cost model at %s is not used: %s", path, exc)
        return None
