"""``kernelwright model``: train, evaluate and show the learned cost model.

    kernelwright model train [--db RUNS.sqlite ...] [--out PATH]     # from the run databases' timed candidates
    kernelwright model eval  [--db RUNS.sqlite ...] [--json]         # leave-one-problem-out and -family-out
    kernelwright model show  [--model PATH] [--db RUNS.sqlite ...]   # what it was trained on; stale or not

Without ``--db`` the cache's runs.sqlite is read (every optimize and bench run writes it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kernelwright.errors import InputError

HELP = "train, evaluate or show the learned cost model that orders configurations before they are timed"


def default_model_path() -> Path:
    from kernelwright.config import config

    return Path(config.cache_dir) / "costmodel" / "model.txt"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("train", "eval", "show"))
    p.add_argument("--db", type=Path, action="append", default=[],
                   help="run database(s) to read (repeat; default: the cache's runs.sqlite)")
    p.add_argument("--model", "--out", dest="model", type=Path, default=None,
                   help="the model file (default: the cache's costmodel/model.txt)")
    p.add_argument("--min-size", type=int, default=2, help="eval: also summarize runs of at least this many "
                                                           "candidates (default 2; 6 shows the larger searches)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _data(args: argparse.Namespace) -> Any:
    from kernelwright.costmodel.data import default_databases, load

    paths = default_databases(args.db)
    if not paths:
        raise InputError("no run database to learn from: give --db RUNS.sqlite (a bench's, e.g. "
                         "benchmarks/results/bench-h200.sqlite) or run optimize/bench on a GPU first")
    return load(paths)


def run(args: argparse.Namespace) -> int:
    from kernelwright.costmodel import model as cm

    path = args.model or default_model_path()
    if args.action == "train":
        data = _data(args)
        trained = cm.train(data, seed=args.seed)
        trained.save(path)
        meta = trained.meta
        print(json.dumps(meta, indent=2) if args.json else
              f"trained on {meta['rows']} timed candidates in {meta['groups']} runs of {len(meta['problems'])} "
              f"problems ({', '.join(meta['sources'])}); saved {path}")
        return 0
    if args.action == "show":
        trained = cm.RankModel.load(path)
        meta = dict(trained.meta)
        if args.db or path == default_model_path():
            try:
                meta["stale"] = _data(args).digest != meta["data_digest"]
            except InputError:
                meta["stale"] = None
        gains = trained.booster.feature_importance(importance_type="gain")
        meta["importance"] = dict(sorted(zip(trained.features, map(float, gains)), key=lambda kv: -kv[1])[:12])
        if args.json:
            print(json.dumps(meta, indent=2))
        else:
            stale = {True: "stale (the run databases changed since: retrain)", False: "current",
                     None: "not checked"}[meta.get("stale")]
            print(f"{path}: {meta['rows']} candidates, {meta['groups']} runs, {len(meta['problems'])} problems, "
                  f"trained {meta['trained']} (LightGBM {meta['lightgbm']}); {stale}")
            print("features by gain: " + ", ".join(f"{k} {v:.0f}" for k, v in meta["importance"].items()))
        return 0
    data = _data(args)
    report: dict[str, Any] = {"rows": len(data.rows), "runs": len(data.groups),
                              "problems": len({r.problem for r in data.rows}), "sources": list(data.sources)}
    for by in ("problem", "family"):
        results = cm.cross_validate(data, by, seed=args.seed)
        report[f"leave_one_{by}_out"] = {f"runs>={n}": cm.summarize(results, min_size=n)
                                         for n in sorted({2, args.min_size})}
    control = cm.cross_validate(cm.shuffled_control(data, seed=args.seed), "problem", seed=args.seed)
    report["shuffled_control"] = cm.summarize(control)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


def render(report: dict[str, Any]) -> str:
    lines = [f"{report['rows']} timed candidates in {report['runs']} runs of {report['problems']} problems "
             f"({', '.join(report['sources'])})", "",
             "| held out | runs | ordering | Kendall tau | top-1 | top-5 recall | measured to reach 5% |",
             "|---|---|---|---|---|---|---|"]
    sections = [(f"{by} ({key})", summary) for by in ("problem", "family")
                for key, summary in report[f"leave_one_{by}_out"].items()]
    sections.append(("shuffled timings (control)", report["shuffled_control"]))
    for title, summary in sections:
        for name in ("model", "search_order", "random"):
            m = summary[name]
            lines.append(f"| {title} | {summary['runs']} | {name.replace('_', ' ')} | {m['tau']:.2f} | "
                         f"{m['top1']:.2f} | {m['top5']:.2f} | {m['measured_to_5pct']:.0%} |")
    return "\n".join(lines)
