"""Every configuration of a problem's template groups, at the problem's own sizes, on the GPU: a quick look at a new
family before the verifier's full protocol (which proves one candidate in minutes; this looks at all of them in
seconds). Not a proof — no trials, no integrity checks, no roofline: the verifier does those.

    python3 scripts/family_sweep.py PROBLEM.py [PROBLEM.py ...] [--configs 6] [--out DIR]
    python3 scripts/family_sweep.py problems/min_dim0.py --grid strategy=split block_m=64,128,256 programs=512,2048

With ``--grid KEY=V1,V2 ...``, the configurations are the product of the values given, each laid over every
configuration of each group's space (the tuner's own choices with these keys replaced; a value ``none`` is None),
duplicates dropped — a wider space than the family's, to measure how close the family's own gets to its best (issue
16). A combination the template cannot render is an error row, not the end of the sweep.

With ``--db RUNS.sqlite`` (a bench's run database: benchmarks/results/bench-h200.sqlite), each problem also gets a
search-versus-exhaustive line (issue 16): the configuration its latest verified winner chose (one group's problems:
the winner's config index), how many candidates that search timed, and the winner's median here over the best
median of the whole space, side by side in this one run.

Per problem and configuration: the largest difference from the problem's own ``Model`` (same weights, same
inputs) relative to the reference's largest magnitude, the candidate's and eager PyTorch's medians
(``triton.testing.do_bench``) and their ratio. Writes ``family-sweep.json`` into ``--out`` as each row finishes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(problem: Path, device: str, name: str):
    """The problem module, its Model (seed 0) and its inputs (seed 1) on ``device``: what every timing here feeds."""
    import torch

    reference = _load(problem, name)
    torch.manual_seed(0)
    model = reference.Model(*reference.get_init_inputs()).to(device)
    torch.manual_seed(1)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in reference.get_inputs()]
    return reference, model, inputs


def _built(path: Path, name: str, reference, model, device: str):
    """A candidate file's ModelNew on ``device`` with the problem's Model's weights (what every timing here runs)."""
    new = _load(path, name).ModelNew(*reference.get_init_inputs()).to(device)
    new.load_state_dict(model.state_dict())
    return new


def median_ms(fn, device: str) -> float | None:
    """do_bench's median with a longer warm-up than its 25 ms (run 43 read the very same min_dim0 file at 0.1075
    ms, its first configuration after seconds of compiling on an idle GPU, and 0.0551 at the end); None without a
    GPU (a dry run under the interpreter)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=100, rep=200, return_mode="median") if device == "cuda" else None


def _value(text: str):
    if text.lower() == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_grid(items: list[str]) -> dict[str, list]:
    grid: dict[str, list] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise SystemExit(f"--grid {item!r}: write KEY=V1,V2 (e.g. block_m=64,128)")
        grid[key] = [_value(v) for v in values.split(",")]
    return grid


def widened(space: list[dict], grid: dict[str, list]) -> list[dict]:
    """The grid's combinations laid over every configuration of ``space``, in the space's order, duplicates
    dropped."""
    import itertools

    if not grid:
        return list(space)
    out: list[dict] = []
    for base in space:
        for values in itertools.product(*grid.values()):
            config = {**base, **dict(zip(grid, values))}
            if config not in out:
                out.append(config)
    return out


def sweep(problem: Path, out_dir: Path, limit: int, arch: str, device: str,
          grid: dict[str, list] | None = None, backend: str = "all") -> list[dict]:
    import torch

    from kernelwright.generate.cuda import on_backend
    from kernelwright.generate.emit import emit
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import load_families, plan

    families = {f.name: f for f in load_families()}
    graph = capture(problem)
    the_plan = plan(graph, list(families.values()), arch=arch)
    spaces = [widened([dict(c) for c in on_backend(families[g.family].space(graph, g, arch), backend)], grid or {})
              for g in the_plan.groups]
    reference, model, inputs = _reference(problem, device, f"ref_{problem.stem}")

    def bench(fn) -> float | None:
        return median_ms(fn, device)

    with torch.no_grad():
        want = model(*inputs)
        eager_ms = bench(lambda: model(*inputs))
    want = want[0] if isinstance(want, (tuple, list)) else want
    scale = want.float().abs().max().item() or 1.0
    rows = []
    built: list[tuple[dict, object]] = []  # (row, model) of each configuration that ran: timed again at the end
    for index in range(max(len(s) for s in spaces) if spaces else 0):
        if index >= limit:
            break
        configs = [s[min(index, len(s) - 1)] for s in spaces]
        row = {"problem": problem.stem, "config": index, "families": [g.family for g in the_plan.groups],
               "configs": configs, "uncovered": sorted({graph.node(n).op for n in the_plan.uncovered}),
               "eager_ms": eager_ms}
        try:
            path = out_dir / f"{problem.stem}_c{index}.py"
            path.write_text(emit(the_plan, families, configs, title=f"sweep of {problem.name}"))
            new = _built(path, f"cand_{problem.stem}_{index}", reference, model, device)
            with torch.no_grad():
                got = new(*inputs)
                got = got[0] if isinstance(got, (tuple, list)) else got
                row["max_rel_error"] = (got.float() - want.float()).abs().max().item() / scale
                row["ms"] = bench(lambda new=new: new(*inputs))
            row["vs_eager"] = eager_ms / row["ms"] if row["ms"] else None
            built.append((row, new))
        except Exception as exc:  # one configuration's failure is a row, not the end of the sweep
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc(limit=2)
        rows.append(row)
        if "error" in row:
            shown = row["error"]
        elif row["ms"] is None:
            shown = f"err {row['max_rel_error']:.1e} (not timed)"
        else:
            shown = f"err {row['max_rel_error']:.1e} {row['ms']:.4f} ms {row['vs_eager']:.2f}x eager"
        print(f"{problem.stem} c{index} {configs[0] if configs else ''}: {shown}", flush=True)
    # A second pass in reverse order: each configuration is timed twice, at both ends of the sweep (METHOD.md:
    # time the same version twice; a difference smaller than that spread is noise). The row keeps the lower.
    with torch.no_grad():
        for row, new in reversed(built):
            again = bench(lambda new=new: new(*inputs))
            if again is not None and row.get("ms"):
                row["ms_first"], row["ms_second"] = row["ms"], again
                row["ms"] = min(row["ms"], again)
                row["vs_eager"] = eager_ms / row["ms"]
                print(f"{problem.stem} c{row['config']} again: {again:.4f} ms (first {row['ms_first']:.4f})",
                      flush=True)
    return rows


def ptx_rewrites(problem: Path, rows: list[dict], out_dir: Path, device: str) -> list[dict]:
    """The sweep's fastest Triton configuration with each of the search's PTX rewrite pass sets
    (search/rewrites.py), each timed twice beside the plain file in the same order (plain, rewrite, rewrite,
    plain): the per-pass figures of issue 30 item 2. A rewrite changes cache hints only, so its output must equal
    the plain file's bit for bit."""
    import torch

    from kernelwright.generate.ptx_variant import with_ptx_rewrite
    from kernelwright.search.rewrites import PASS_SETS

    ran = [r for r in rows if "error" not in r and all(c.get("backend", "triton") == "triton" for c in r["configs"])]
    if not ran:
        return []
    best = min(ran, key=lambda r: r.get("ms") or float("inf"))
    plain_path = out_dir / f"{problem.stem}_c{best['config']}.py"
    reference, model, inputs = _reference(problem, device, f"ref_{problem.stem}_ptx")

    out = []
    with torch.no_grad():
        plain = _built(plain_path, f"ptx_plain_{problem.stem}", reference, model, device)
        want = plain(*inputs)
        want = want[0] if isinstance(want, (tuple, list)) else want
        for passes in PASS_SETS:
            row = {"problem": problem.stem, "config": best["config"], "ptx_passes": list(passes)}
            try:
                path = out_dir / f"{problem.stem}_c{best['config']}_{'_'.join(passes)}.py"
                path.write_text(with_ptx_rewrite(plain_path.read_text(), passes))
                name = f"ptx_{problem.stem}_{'_'.join(passes)}".replace("-", "_")
                new = _built(path, name, reference, model, device)
                got = new(*inputs)
                got = got[0] if isinstance(got, (tuple, list)) else got
                row["identical"] = bool(torch.equal(got, want))
                def run_plain(plain=plain):
                    return plain(*inputs)

                def run_new(new=new):
                    return new(*inputs)

                a1, b1 = median_ms(run_plain, device), median_ms(run_new, device)
                b2, a2 = median_ms(run_new, device), median_ms(run_plain, device)
                if None not in (a1, a2, b1, b2):
                    row.update(plain_ms=min(a1, a2), ms=min(b1, b2), plain_spread=abs(a1 - a2) / min(a1, a2))
                    row["speedup"] = row["plain_ms"] / row["ms"]
                    shown = (f"{row['ms']:.4f} ms vs plain {row['plain_ms']:.4f} ({row['speedup']:.3f}x, plain "
                             f"spread {100 * row['plain_spread']:.1f}%), identical {row['identical']}")
                else:
                    shown = f"identical {row['identical']} (not timed)"
            except Exception as exc:  # one pass's failure is a row
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                shown = row["error"]
                traceback.print_exc(limit=3)
            print(f"{problem.stem} c{best['config']} ptx {'+'.join(passes)}: {shown}", flush=True)
            out.append(row)
    return out


def search_choice(db: Path, name: str) -> dict | None:
    """The latest verified winner's configuration indices (its ``template_choice``) and how many candidates its
    search timed, from a bench's run database; None when the problem has no verified winner there."""
    import sqlite3

    with sqlite3.connect(db) as con:
        row = con.execute("""select r.id, c.meta_json, r.settings_json, c.source from runs r join problems p on p.id = r.problem_id
                             join candidates c on c.run_id = r.id join verdicts v on v.id = c.verdict_id
                             where p.name = ? and v.status = 'passed' order by r.id desc, v.median_ms limit 1""",
                          (name,)).fetchone()
        if row is None:
            return None
        timed = con.execute("select count(*) from candidates where run_id = ? and median_ms is not null",
                            (row[0],)).fetchone()[0]
    meta, settings = json.loads(row[1] or "{}"), json.loads(row[2] or "{}")
    return {"run": row[0], "choice": meta.get("template_choice"), "timed": timed, "source": row[3],
            "budget_s": settings.get("budget_s") or settings.get("budget_per_problem_s")}


def time_file(problem: Path, path: Path, device: str) -> float | None:
    """do_bench of a candidate file, built and fed as the sweep's are (same seeds): the search's winner as it was
    written, whatever the space's order is today."""
    import torch

    reference, model, inputs = _reference(problem, device, f"ref_{problem.stem}_w")
    new = _built(path, f"winner_{problem.stem}", reference, model, device)
    with torch.no_grad():
        new(*inputs)
        times = [median_ms(lambda: new(*inputs), device) for _ in range(2)]
    return None if None in times else min(times)


def versus(rows: list[dict], chosen: dict, winner_ms: float | None) -> dict:
    """The search's winner (timed here as ``winner_ms``) against the space's best, from one problem's sweep rows."""
    timed = [r for r in rows if r.get("ms")]
    out = {"problem": rows[0]["problem"] if rows else None, "configs_in_space": len(rows),
           **{k: v for k, v in chosen.items() if k != "source"}, "winner_ms": winner_ms}
    if not timed or winner_ms is None:
        out["note"] = "nothing timed: not compared"
        return out
    best = min(timed, key=lambda r: r["ms"])
    out.update(best_config=best["config"], best_ms=best["ms"], winner_over_best=winner_ms / best["ms"],
               configs_faster_than_winner=sum(r["ms"] < winner_ms for r in timed))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--configs", type=int, default=None,
                        help="at most this many configurations a problem (default 6; with --grid, all of them)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/family-sweep"))
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run under TRITON_INTERPRET=1, nothing timed")
    parser.add_argument("--db", type=Path, default=None,
                        help="a bench's run database: compare each problem's verified search winner with the sweep")
    parser.add_argument("--backend", choices=("triton", "cuda", "all"), default="all",
                        help="the back ends' configurations to sweep (cuda: the CUDA C++ ones alone)")
    parser.add_argument("--ptx-rewrites", action="store_true",
                        help="also time the fastest Triton configuration with each PTX rewrite pass set beside it")
    parser.add_argument("--grid", nargs="*", default=[], metavar="KEY=V1,V2",
                        help="sweep these values over the groups' configurations (a wider space than the family's)")
    args = parser.parse_args()
    grid = parse_grid(args.grid)
    if args.configs is None:
        args.configs = 1 << 30 if grid else 6
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for problem in args.problems:
        started = time.time()
        try:
            rows = sweep(problem, args.out, args.configs, args.arch, args.device, grid, args.backend)
            results += rows
            if args.ptx_rewrites:
                results += ptx_rewrites(problem, rows, args.out, args.device)
            chosen = search_choice(args.db, problem.stem) if args.db else None
            if chosen is not None:
                winner = args.out / f"{problem.stem}_winner.py"
                winner.write_text(chosen["source"])
                results.append({"versus": versus(rows, chosen, time_file(problem, winner, args.device))})
                print(f"{problem.stem}: search vs exhaustive {json.dumps(results[-1]['versus'])}", flush=True)
        except Exception as exc:
            results.append({"problem": problem.stem, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            print(f"{problem.stem}: {results[-1]['error']}", flush=True)
        print(f"{problem.stem}: {time.time() - started:.0f} s", flush=True)
        (args.out / "family-sweep.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
