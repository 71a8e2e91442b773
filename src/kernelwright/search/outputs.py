"""What an optimize run leaves behind: ``best.py``, ``verdict.json``, ``candidates.csv``, ``report.md``."""

from __future__ import annotations

import csv
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelwright.search.records import OptimizeResult, SearchResult
    from kernelwright.verify.records import Verdict


def _config_text(configs: tuple) -> str:
    return "; ".join(",".join(f"{k}={v}" for k, v in c.items()) for c in configs)


def _timing_table(v: Verdict) -> list[str]:
    """The winner against eager and torch.compile, side by side, and its share of the roofline floor."""
    cand = v.median_ms()
    lines = ["", "| | median ms | speedup |", "|---|---|---|"]
    for key, label in (("candidate", "kernelwright"), ("eager", "eager PyTorch"),
                       ("eager_defaults", "eager PyTorch at its defaults (TF32 cuDNN)"),
                       ("compile", "torch.compile"), ("compile_max_autotune", "torch.compile max-autotune")):
        m = v.median_ms(key)
        if m:
            speed = "" if key == "candidate" or not cand else f"{m / cand:.2f}x"
            lines.append(f"| {label} | {m:.4f} | {speed} |")
    if v.percent_of_floor is not None:
        lines.append(f"\nAt {v.percent_of_floor:.0f}% of the achievable roofline floor.")
    return lines


def write_outputs(result: OptimizeResult) -> None:
    from kernelwright.verify.records import verdict_json

    out = result.out_dir
    with open(out / "candidates.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["candidate", "label", "families", "configs", "status", "median_ms", "verdict", "error",
                         "file"])
        families = ",".join(g.family for g in result.plan.groups)
        for o in result.outcomes:
            verdict_ms = o.verdict.median_ms() if o.verdict else None
            writer.writerow([
                f"c{o.candidate.index:03d}", o.candidate.label, families, _config_text(o.candidate.configs),
                o.status, o.median_ms if o.median_ms is not None else (verdict_ms or ""),
                o.verdict.message if o.verdict else "", o.error or "",
                o.candidate.path.relative_to(out) if o.candidate.path.is_relative_to(out) else o.candidate.path,
            ])
    best = result.best
    for stale in ("best.py", "verdict.json"):
        (out / stale).unlink(missing_ok=True)
    if best is not None:
        shutil.copyfile(best.candidate.path, out / "best.py")
        if best.verdict is not None:
            (out / "verdict.json").write_text(verdict_json(best.verdict) + "\n")
    (out / "report.md").write_text(render_report(result))
    write_run_json(out, generator="templates", problem=result.problem, arch=result.arch, device=result.device,
                   timed=result.timed, policy=result.policy,
                   verdict=best.verdict if best is not None else None, has_best=best is not None)


def render_report(result: OptimizeResult) -> str:
    plan = result.plan
    best = result.best
    lines = [
        f"# kernelwright optimize — {result.problem.name}",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M', time.localtime())}; device: {result.device}; "
        f"target arch: {result.arch}; wall time {result.elapsed_s:.0f} s"
        + ("; **interrupted** (Ctrl-C): the best candidate so far was kept" if result.interrupted else ""),
        f"- candidates built: {len(result.outcomes)}",
        "",
        "## Plan",
        "",
        *(f"- {line}" for line in plan.describe()),
    ]
    if plan.uncovered:
        lines += ["", "Operators no template covers run in PyTorch inside the generated `ModelNew` (see above). "
                      "For those, `--generator llm` is the next step."]
    lines += ["", "## Result", ""]
    if best is None:
        lines.append("No candidate was built.")
    elif best.verdict is None:
        lines.append(f"Best candidate: `best.py` (c{best.candidate.index:03d}) — **not verified** "
                     f"({'interrupted' if result.interrupted else 'no finalist reached the verifier'}).")
    else:
        v = best.verdict
        lines.append(f"Best candidate: `best.py` (c{best.candidate.index:03d}, {best.candidate.label}) — "
                     f"verdict **{v.status}**{'' if v.clean or not v.passed else ' (not clean)'}: {v.message}")
        if not result.timed:
            judged = ("proven correct under the Triton interpreter" if v.passed else
                      f"judged under the Triton interpreter and found {v.status}")
            lines += ["", "**Nothing was timed**: there is no GPU here. The candidate is each template's default "
                          f"configuration, {judged}; the instruction summary below "
                          f"is for {result.arch}, compiled without a GPU."]
            if v.size_overrides:
                lines += ["", "The interpreter checked it at reduced sizes (" + ", ".join(
                    f"`{k} = {val}`" for k, val in v.size_overrides.items()) + "); the candidate is meant to read "
                    "every size from its tensors, and the verifier's second-shape trial checks that too."]
        else:
            lines += _timing_table(v)
        if v.instructions:
            lines += ["", "## Instructions", ""]
            for k in v.instructions:
                classes = ", ".join(f"{c} {n}" for c, n in sorted(k.histogram_by_class.items(),
                                                                   key=lambda kv: -kv[1])[:6])
                used = [c for c, on in k.distinctive.items() if on]
                lines.append(f"- `{k.name}` ({k.arch}): {k.registers} registers, "
                             f"{k.spill_store_bytes or 0} B spilled; {classes}; distinctive classes used: "
                             f"{', '.join(used) or 'none'}")
        if v.findings:
            lines += ["", "## Findings", ""]
            lines += [f"- {f.severity} `{f.code}`: {f.message}" for f in v.findings]
    if result.rewrites:
        lines += _rewrite_lines(result)
    lines += ["", "## Candidates", "", "See `candidates.csv` (every candidate, its configuration, status and time)."]
    timed = sorted((o for o in result.outcomes if o.median_ms is not None), key=lambda o: o.median_ms or 0.0)
    if timed:
        lines += ["", "| candidate | change | median ms | status |", "|---|---|---|---|"]
        for o in timed[:10]:
            lines.append(f"| c{o.candidate.index:03d} | {o.candidate.label} | {o.median_ms:.4f} | {o.status} |")
    return "\n".join(lines) + "\n"


def _rewrite_lines(result: OptimizeResult) -> list[str]:
    """The PTX rewrite stage's table: each pass set beside the plain leader, timed in one batch."""
    base = result.rewrites[0]
    lines = ["", "## PTX rewrites", "",
             f"The leader's kernels (c{base.base:03d}) with each rewrite of their PTX, timed beside it in one batch "
             "(`kernelwright inspect A --diff B` shows the SASS difference); a rewrite becomes a finalist only where "
             "it is at least 1% faster.", "", "| passes | candidate | median ms | plain ms | speedup | kept |",
             "|---|---|---|---|---|---|"]
    for t in result.rewrites:
        ms = f"{t.median_ms:.4f}" if t.median_ms is not None else (t.error or "not timed")
        plain = f"{t.base_ms:.4f}" if t.base_ms is not None else "-"
        ratio = f"{t.ratio:.3f}x" if t.ratio is not None else "-"
        lines.append(f"| {' + '.join(t.passes)} | c{t.candidate:03d} | {ms} | {plain} | {ratio} | "
                     f"{'yes' if t.kept else 'no'} |")
    return lines


def summary_json(result: OptimizeResult) -> str:
    best = result.best
    return json.dumps({
        "problem": str(result.problem),
        "out_dir": str(result.out_dir),
        "plan": result.plan.describe(),
        "timed": result.timed,
        "interrupted": result.interrupted,
        "best": None if best is None else {
            "candidate": best.candidate.index, "status": best.status,
            "verdict": best.verdict.message if best.verdict else None,
            "ptx_passes": list(best.candidate.ptx_passes),
        },
        "ptx_rewrites": [{"passes": list(t.passes), "candidate": t.candidate, "base": t.base, "median_ms": t.median_ms,
                          "base_ms": t.base_ms, "kept": t.kept} for t in result.rewrites],
    }, indent=2)


def _curve_rows(points: list[dict]) -> list[dict]:
    """At most ~12 rows of a per-sample curve: 1, 2, 4, 8, … and the last."""
    keep = {1, len(points)}
    k = 1
    while k < len(points):
        keep.add(k)
        k *= 2
    return [p for p in points if p["samples"] in keep]


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value else "-"


def write_search_outputs(result: SearchResult) -> None:
    """``best.py``, ``verdict.json`` (the winner's verdict plus the search: scaling curve, usage), ``candidates.csv``
    and ``report.md`` for an LLM (or hybrid) run."""
    from kernelwright.verify.records import verdict_json

    out = result.out_dir
    with open(out / "candidates.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["index", "candidate_id", "origin", "lineage", "round", "parents", "status", "median_ms",
                         "speedup_vs_eager", "message", "file"])
        for e in sorted(result.entries, key=lambda e: e.index):
            writer.writerow([e.index, e.candidate_id or "", e.origin, e.lineage, e.round,
                             " ".join(str(p) for p in e.parents),
                             str(e.verdict.status) if e.verdict else "no code", e.median_ms or "",
                             e.speedup_vs_eager or "", (e.verdict.message if e.verdict else e.failure or "")[:300],
                             e.path or ""])
    for stale in ("best.py", "verdict.json"):
        (out / stale).unlink(missing_ok=True)
    search = {"run_id": result.run_id, "strategy": result.strategy, "stop_reason": result.stop_reason,
              "interrupted": result.interrupted, "elapsed_s": round(result.elapsed_s, 1), "usage": dict(result.usage),
              "scaling": dict(result.scaling)}
    best = result.best
    if best is not None and best.source is not None:
        (out / "best.py").write_text(best.source)
        data = json.loads(verdict_json(best.verdict)) if best.verdict is not None else {}
        data["search"] = search
        (out / "verdict.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / "report.md").write_text(render_search_report(result))
    write_run_json(out, generator="llm", problem=result.problem, arch=result.arch, device=result.device,
                   timed=result.timed, policy=result.policy, verdict=best.verdict if best is not None else None,
                   has_best=best is not None and best.source is not None, run_id=result.run_id)


def write_run_json(out: Path, *, generator: str, problem: Path, arch: str, device: str, timed: bool, policy: Any,
                   verdict: Verdict | None, has_best: bool, run_id: int | None = None) -> None:
    """``run.json``: what ``kernelwright export`` needs to package the run without the rest of the folder — the
    problem's source (the reference, the fallback), the target arch, the device and the precision policy."""
    import hashlib

    source = Path(problem).read_text()
    (out / "run.json").write_text(json.dumps({
        "kind": "kernelwright-run", "version": 1, "generator": generator, "run_id": run_id,
        "problem": str(Path(problem).resolve()), "problem_name": Path(problem).stem,
        "problem_sha256": hashlib.sha256(source.encode()).hexdigest(), "problem_source": source,
        "arch": arch, "device": device, "device_name": (verdict.device or {}).get("name") if verdict else None,
        "timed": timed, "allow_tf32": bool(policy.allow_tf32),
        "allow_reduced_precision": bool(policy.allow_reduced_precision),
        "best": "best.py" if has_best else None, "status": str(verdict.status) if verdict else None,
        "passed": bool(verdict is not None and verdict.passed),
    }, indent=1) + "\n")


def render_search_report(result: SearchResult) -> str:
    u = result.usage
    cost = f", ${u['cost_usd']:.2f}" if u.get("cost_usd") else ""
    lines = [
        f"# kernelwright optimize (LLM) — {result.problem.name}",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M', time.localtime())}; device: {result.device}; target arch: "
        f"{result.arch}; run {result.run_id} (`kernelwright runs show {result.run_id}`)",
        f"- strategy: {result.strategy}; {len(result.entries)} candidates in {result.elapsed_s:.0f} s; "
        f"stopped: {result.stop_reason}",
        f"- LLM: {u.get('calls', 0)} calls ({u.get('failures', 0)} failed), "
        f"{u.get('prompt_tokens', 0)} prompt + {u.get('completion_tokens', 0)} completion tokens{cost}",
        "",
        "## Result",
        "",
    ]
    best = result.best
    if best is None or best.verdict is None:
        lines.append("No candidate passed the verifier. The candidates and what was wrong with each are below; "
                     "`--generator templates` gives a verified kernel where the template library covers the problem.")
    else:
        v = best.verdict
        lines.append(f"Best: `best.py` (candidate {best.candidate_id}, {best.origin}, lineage {best.lineage}, "
                     f"round {best.round}) — verdict **{v.status}**: {v.message}")
        if not result.timed:
            lines += ["", "**Nothing was timed**: there is no GPU here; the candidates were proven correct under the "
                          "Triton interpreter only."]
        else:
            lines += _timing_table(v)
    scaling = result.scaling
    if scaling.get("by_samples"):
        lines += ["", "## Inference-time scaling", "", "By samples spent (in the order they finished):", "",
                  "| samples | correct | fraction correct | solved | best speedup vs eager |", "|---|---|---|---|---|"]
        for p in _curve_rows(scaling["by_samples"]):
            lines.append(f"| {p['samples']} | {p['correct']} | {p['fraction_correct']:.2f} | "
                         f"{'yes' if p['solved'] else 'no'} | {_ratio(p['best_speedup_vs_eager'])} |")
    if scaling.get("by_rounds"):
        lines += ["", "By rounds (per lineage):", "", "| round | lineages correct | fraction | best speedup vs eager |",
                  "|---|---|---|---|"]
        for p in scaling["by_rounds"]:
            lines.append(f"| {p['round']} | {p['lineages_correct']}/{p['lineages']} | {p['fraction_correct']:.2f} | "
                         f"{_ratio(p['best_speedup_vs_eager'])} |")
    lines += ["", "## Candidates", "", "| # | origin | lineage | round | status | ms | what happened |",
              "|---|---|---|---|---|---|---|"]
    for e in sorted(result.entries, key=lambda e: e.index)[:60]:
        what = (e.verdict.message if e.verdict else e.failure or "").replace("|", "/")[:120]
        lines.append(f"| {e.index} | {e.origin} | {e.lineage} | {e.round} | "
                     f"{e.verdict.status if e.verdict else 'no code'} | {e.median_ms or '-'} | {what} |")
    return "\n".join(lines) + "\n"
