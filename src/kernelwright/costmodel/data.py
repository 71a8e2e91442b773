"""Training data from run databases: every timed candidate (a median from the GPU, passed or only timed by the
tuner), grouped by its run — one problem on one device, the candidates that competed there — with the features of
:mod:`.features`. Runs with fewer than two timed candidates teach no ordering and are left out.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.costmodel.features import candidate_features, families_of
from kernelwright.errors import InputError


@dataclass(frozen=True)
class Row:
    group: str  # database and run id: the candidates timed against each other
    problem: str  # the problem's name (leave-one-problem-out holds out every run of it)
    family: str  # the families of its templates, joined ("gemm", "conv+pointwise"): leave-one-family-out
    order: int  # its place in the search's own order (the candidate's id within the run)
    median_ms: float
    features: dict[str, float] = field(repr=False)


@dataclass(frozen=True)
class Dataset:
    rows: tuple[Row, ...]
    sources: tuple[str, ...]  # the databases read
    digest: str  # SHA-256 over the rows' identity and timings: a model trained on other data says it is stale

    @property
    def groups(self) -> dict[str, list[Row]]:
        out: dict[str, list[Row]] = {}
        for row in self.rows:
            out.setdefault(row.group, []).append(row)
        return out

    def feature_names(self) -> list[str]:
        names: dict[str, None] = {}
        for row in self.rows:
            names.update(dict.fromkeys(row.features))
        return sorted(names)


_QUERY = """
    SELECT c.id, c.run_id, c.source, c.median_ms, r.arch, r.device, p.name, p.sha256
    FROM candidates c JOIN runs r ON c.run_id = r.id JOIN problems p ON r.problem_id = p.id
    WHERE c.median_ms IS NOT NULL AND c.median_ms > 0 AND r.device != 'cpu'
    ORDER BY c.run_id, c.id
"""


def _rooflines(db: sqlite3.Connection) -> dict[str, dict]:
    """A roofline record per problem (by content hash) from any of its verdicts."""
    found: dict[str, dict] = {}
    for sha, text in db.execute("SELECT problem_sha256, verdict_json FROM verdicts"):
        if sha in found:
            continue
        try:
            roofline = json.loads(text).get("roofline")
        except (TypeError, ValueError):
            continue
        if roofline:
            found[sha] = roofline
    return found


def load(paths: Sequence[Path | str], *, min_group: int = 2) -> Dataset:
    """The timed candidates of the run databases ``paths``, in groups of at least ``min_group``."""
    rows: list[Row] = []
    digest = hashlib.sha256()
    read = []
    for path in map(Path, paths):
        if not path.is_file():
            raise InputError(f"run database {path} does not exist: give --db a kernelwright runs.sqlite "
                             "(a bench's, or the cache's)")
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            try:
                records = db.execute(_QUERY).fetchall()
            except sqlite3.DatabaseError as exc:
                raise InputError(f"{path} is not a kernelwright run database ({exc})") from None
            rooflines = _rooflines(db)
        read.append(str(path))
        by_run: dict[int, list[tuple]] = {}
        for record in records:
            by_run.setdefault(record[1], []).append(record)
        for run_id, members in by_run.items():
            if len(members) < min_group:
                continue
            for order, (_cid, _, source, ms, arch, _device, name, sha) in enumerate(members):
                family = "+".join(families_of(source)) or "none"
                features = candidate_features(source, rooflines.get(sha), arch)
                # The search's own order is known before timing too (the templates list measured leads first):
                # the model may learn where to trust it.
                features["search_rank"] = float(order)
                features["search_rank_share"] = order / (len(members) - 1)
                rows.append(Row(group=f"{path.name}:{run_id}", problem=name, family=family, order=order,
                                median_ms=float(ms), features=features))
                digest.update(f"{sha}:{hashlib.sha256(source.encode()).hexdigest()}:{ms!r}".encode())
    return Dataset(rows=tuple(rows), sources=tuple(read), digest=digest.hexdigest())


def default_databases(extra: Iterable[Path | str] = ()) -> list[Path]:
    """The run databases a ``model`` command reads without ``--db``: the cache's runs.sqlite where it exists."""
    from kernelwright.config import config

    found = [Path(p) for p in extra]
    cache = Path(config.cache_dir) / "runs.sqlite"
    if not found and cache.is_file():
        found.append(cache)
    return found
