"""What an optimize run leaves behind: ``best.py``, ``verdict.json``, ``candidates.csv``, ``report.md``."""

from __future__ import annotations

import csv
import json
import shutil
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelwright.search.optimize import OptimizeResult


def _config_text(configs: tuple) -> str:
    return "; ".join(",".join(f"{k}={v}" for k, v in c.items()) for c in configs)


def write_outputs(result: OptimizeResult) -> None:
    from kernelwright.verify.verifier import verdict_json

    out = result.out_dir
    with open(out / "candidates.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["candidate", "label", "families", "configs", "status", "median_ms", "verdict", "error",
                         "file"])
        families = ",".join(g.family for g in result.plan.groups)
        for o in result.outcomes:
            verdict_ms = (o.verdict.timing.get("candidate") or {}).get("median_ms") if o.verdict else None
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
            lines += ["", "**Nothing was timed**: there is no GPU here. The candidate is each template's default "
                          "configuration, proven correct under the Triton interpreter; the instruction summary below "
                          f"is for {result.arch}, compiled without a GPU."]
            if v.size_overrides:
                lines += ["", "The interpreter checked it at reduced sizes (" + ", ".join(
                    f"`{k} = {val}`" for k, val in v.size_overrides.items()) + "); the candidate reads every size "
                    "from its tensors, and the verifier's second-shape trial checks that too."]
        else:
            lines += ["", "| | median ms | speedup |", "|---|---|---|"]
            cand = (v.timing.get("candidate") or {}).get("median_ms")
            for key, label in (("candidate", "kernelwright"), ("eager", "eager PyTorch"),
                               ("compile", "torch.compile"), ("compile_max_autotune", "torch.compile max-autotune")):
                m = v.timing.get(key)
                if m:
                    speed = "" if key == "candidate" or not cand else f"{m['median_ms'] / cand:.2f}x"
                    lines.append(f"| {label} | {m['median_ms']:.4f} | {speed} |")
            if v.percent_of_floor is not None:
                lines.append(f"\nAt {v.percent_of_floor:.0f}% of the achievable roofline floor.")
        if v.instructions:
            lines += ["", "## Instructions", ""]
            for k in v.instructions:
                classes = ", ".join(f"{c} {n}" for c, n in sorted((k.get("histogram_by_class") or {}).items(),
                                                                   key=lambda kv: -kv[1])[:6])
                used = [c for c, on in (k.get("distinctive") or {}).items() if on]
                lines.append(f"- `{k.get('name')}` ({k.get('arch')}): {k.get('registers')} registers, "
                             f"{k.get('spill_store_bytes') or 0} B spilled; {classes}; distinctive classes used: "
                             f"{', '.join(used) or 'none'}")
        if v.findings:
            lines += ["", "## Findings", ""]
            lines += [f"- {f.severity} `{f.code}`: {f.message}" for f in v.findings]
    lines += ["", "## Candidates", "", "See `candidates.csv` (every candidate, its configuration, status and time)."]
    timed = sorted((o for o in result.outcomes if o.median_ms is not None), key=lambda o: o.median_ms or 0.0)
    if timed:
        lines += ["", "| candidate | change | median ms | status |", "|---|---|---|---|"]
        for o in timed[:10]:
            lines.append(f"| c{o.candidate.index:03d} | {o.candidate.label} | {o.median_ms:.4f} | {o.status} |")
    return "\n".join(lines) + "\n"


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
        },
    }, indent=2)
