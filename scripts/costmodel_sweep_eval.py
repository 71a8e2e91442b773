"""Issue 31's figure over exhaustive spaces: for each problem a family sweep timed every configuration of
(``scripts/family_sweep.py``, rows in its ``family-sweep.json`` or ``gpu_sweeps.sh``'s ``sweeps.json``), how many
measurements each order needs before it has one within 5% of the space's best — the cost model's order (a model
trained on the run databases *without that problem*: leave-one-problem-out), the templates' own order (what the
search measures without a model), and a random order (exact expectation). CPU only: the configurations' sources
are written again here from the sweep's configs, the way the search writes them.

    python3 scripts/costmodel_sweep_eval.py SWEEPS.json [...] --db benchmarks/results/bench-h200.sqlite \
        --problems problems ../shared/kernelbench/level1

Prints one row a problem and the totals; the issue's target is a model order needing at most 30% of the
measurements the templates' order needs, and a top-5 recall of at least 0.8 on problems the model never saw.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _problem_path(stem: str, folders: list[Path]) -> Path | None:
    for folder in folders:
        found = next(iter(sorted(folder.rglob(f"{stem}.py"))), None)
        if found is not None:
            return found
    return None


def sweep_rows(rows: list[dict], path: Path, arch: str) -> list:
    """The sweep's timed rows of one problem as cost-model rows (sources written again from their configs)."""
    from kernelwright.costmodel.data import Row
    from kernelwright.costmodel.features import candidate_features
    from kernelwright.generate.emit import emit
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan

    families = {f.name: f for f in load_families()}
    graph = capture(path)
    the_plan = plan(graph, list(families.values()), arch=arch)
    out = []
    timed = sorted((r for r in rows if r.get("ms") and "error" not in r), key=lambda r: r["config"])
    for r in timed:
        source = emit(the_plan, families, r["configs"], title=f"sweep of {path.name}")
        features = candidate_features(source, None, arch)  # as the search sees it: no roofline before timing
        features["search_rank"] = float(r["config"] + 1)
        features["search_rank_share"] = (r["config"] + 1) / len(timed)
        out.append(Row(group=f"sweep:{path.stem}", problem=path.stem, family="+".join(r["families"]),
                       order=r["config"], median_ms=float(r["ms"]), features=features))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("--db", nargs="+", type=Path, required=True, help="run databases to train on")
    parser.add_argument("--problems", nargs="+", type=Path, default=[ROOT / "problems"])
    parser.add_argument("--arch", default="sm_90a")
    args = parser.parse_args()

    from kernelwright.costmodel.data import load
    from kernelwright.costmodel.model import _order_metrics, _random_expectation, kendall_tau, train

    data = load(args.db)
    by_problem: dict[str, list[dict]] = {}
    for sweep in args.sweeps:
        for r in json.loads(sweep.read_text()):
            if "problem" in r and "config" in r and not r.get("ptx_passes"):
                by_problem.setdefault(r["problem"], []).append(r)
    print("| problem | family | configs | model: measured to 5% | templates' order | random | model top-5 | "
          "model tau | templates' tau |")
    print("|---|---|---|---|---|---|---|---|---|")
    totals = {"model": 0, "search": 0, "random": 0.0, "top5": []}
    for stem, rows in sorted(by_problem.items()):
        path = _problem_path(stem, args.problems)
        if path is None:
            print(f"| {stem} | - | - | problem file not found under {', '.join(map(str, args.problems))} |")
            continue
        test = sweep_rows(rows, path, args.arch)
        if len(test) < 3:
            continue
        model = train(data, rows=[r for r in data.rows if r.problem != stem])  # leave this problem out
        scores = model.scores(test)
        ms = [r.median_ms for r in test]
        by_model = [m for _, m in sorted(zip(scores, ms), key=lambda p: -p[0])]
        by_search = [r.median_ms for r in sorted(test, key=lambda r: r.order)]
        model_metrics = _order_metrics(by_model)
        # measured_to_5pct is a share of the run: times its size, the measurements themselves
        n_model = round(model_metrics["measured_to_5pct"] * len(ms))
        n_search = round(_order_metrics(by_search)["measured_to_5pct"] * len(ms))
        n_random = _random_expectation(ms)["measured_to_5pct"] * len(ms)
        top5 = model_metrics["top5"]
        totals["model"] += n_model
        totals["search"] += n_search
        totals["random"] += n_random
        totals["top5"].append(top5)
        print(f"| {stem} | {test[0].family} | {len(test)} | {n_model} | {n_search} | {n_random:.1f} | {top5:.0f} | "
              f"{kendall_tau(scores, ms):.2f} | {kendall_tau([-r.order for r in test], ms):.2f} |")
    if totals["top5"]:
        print(f"\ntotal measurements to reach 5%: model {totals['model']}, templates' order {totals['search']}, "
              f"random {totals['random']:.1f}; model / templates' order = "
              f"{totals['model'] / max(totals['search'], 1):.2f} (target <= 0.30); top-5 recall "
              f"{sum(totals['top5']) / len(totals['top5']):.2f} (target >= 0.8) over {len(totals['top5'])} problems")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
