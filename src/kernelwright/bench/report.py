"""The bench's outputs: ``results.json`` (schema in docs/bench.md), a markdown table, and ``report.html`` — one
self-contained file (plots drawn by matplotlib as inline SVG, a few lines of script to sort the table; nothing is
fetched when it is opened).
"""

from __future__ import annotations

import html
import io
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelwright.bench import scores
from kernelwright.bench.rows import BASELINE_LABELS, BASELINES
from kernelwright.records import EAGER_DEFAULTS

SCHEMA = "kernelwright-bench/1"
NOT_TIMED = ("Nothing was timed: no GPU was used, so this report shows correctness and coverage only (every "
             "speed figure needs a CUDA GPU).")


def results_document(outcome: Any) -> dict[str, Any]:
    from kernelwright.bench.runner import settings_json

    timed = outcome.settings.device == "cuda"
    return {
        "schema": SCHEMA,
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": outcome.machine,
        "timed": timed,
        "note": None if timed else NOT_TIMED,
        "settings": settings_json(outcome.settings),
        "interrupted": outcome.interrupted,
        "elapsed_s": round(outcome.elapsed_s, 1),
        "resumed_rows": outcome.reused,
        "summary": scores.summary(outcome.rows),
        # Where a parallel bench's GPU time went: the lock's holds of a second or more, by job and mode
        "gpu_lock_holds": getattr(outcome, "lock_holds", {}) or {},
        "problems": outcome.rows,
    }


# -- markdown -----------------------------------------------------------------------------------------------------
def _f(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else "-"


def _pct(value: float | None) -> str:
    return f"{100 * value:.0f}%" if value is not None else "-"


def markdown(doc: Mapping[str, Any]) -> str:
    s = doc["summary"]
    m = doc["machine"]
    lines = [f"# kernelwright bench — {s['problems']} problems", "",
             f"{m.get('device')}, torch {m.get('torch')}, triton {m.get('triton')}, kernelwright "
             f"{m.get('kernelwright')}; {doc['created']}; generator {doc['settings'].get('generator')}.", ""]
    if not doc["timed"]:
        lines += [f"**{NOT_TIMED}**", ""]
    lines += [f"fast_0 (passed) **{_pct(s['fast_0'])}** ({s['passed']} of {s['problems']})."]
    if doc["timed"]:
        for b in BASELINES:
            fp = s["fast_p"][b]
            lines.append(f"vs {BASELINE_LABELS[b]}: geomean {_f(s['geomean_speedup'][b], '.2f')}x; fast_1.0 "
                         f"{_pct(fp['1'])}, fast_1.5 {_pct(fp['1.5'])}, fast_2.0 {_pct(fp['2'])}.")
        lines.append(f"Speed-of-light score {_f(s['sol_score'], '.2f')}; median % of floor "
                     f"{_f(s['median_percent_of_floor'], '.0f')}.")
    waiting = {b: names for b, names in (s.get("pending") or {}).items() if names}
    if waiting:
        lines.append("Baselines pending (their rows stand; `kernelwright bench --resume` times them): " + "; ".join(
            f"{BASELINE_LABELS[b]} for {len(names)} ({', '.join(names[:8])}{', …' if len(names) > 8 else ''})"
            for b, names in waiting.items()) + ".")
    if s["exploits"]:
        lines.append("Exploits (scored as failures): " + "; ".join(f"{n} ({f})" for n, f in s["exploits"]) + ".")
    lines += ["", "| problem | status | kernelwright ms | eager ms | compile ms | max-autotune ms | vs eager "
              "| vs compile | vs max-autotune | % floor | SOL | tensor cores | back end | in PyTorch | finding |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    holds = doc.get("gpu_lock_holds") or {}
    if holds:  # after the table: where a parallel bench's time on the one GPU went
        lines[-2:-2] = ["GPU lock (`--jobs`: measurements alone on the device, other work shared), holds of 1 s or "
                        "more: " + "; ".join(f"{who} {h['holds']:.0f} x, {h['total_s']:.0f} s in all, longest "
                                             f"{h['max_s']:.1f} s" for who, h in list(holds.items())[:6]) + ".", ""]
    for r in doc["problems"]:
        ms, sp = r["ms"], r["speedup"]
        finding = ", ".join(r.get("findings") or []) or (r["message"][:80] if r["status"] != "passed" else "")
        wait = set(r.get("pending") or ())

        def t(b: str, value: float | None, spec: str, unit: str = "", wait: set[str] = wait) -> str:
            return "pending" if b in wait else _f(value, spec) + unit

        lines.append(
            f"| {r['name']} | {r['status']} | {_f(ms['candidate'], '.4f')} | {t('eager', ms['eager'], '.4f')} | "
            f"{t('compile', ms['compile'], '.4f')} | {t('compile_max_autotune', ms['compile_max_autotune'], '.4f')} | "
            f"{t('eager', sp['eager'], '.2f', 'x')} | {t('compile', sp['compile'], '.2f', 'x')} | "
            f"{t('compile_max_autotune', sp['compile_max_autotune'], '.2f', 'x')} | "
            f"{_f(r['percent_of_floor'], '.0f')} | {_f(r['sol_score'], '.2f')} | "
            f"{_tensor_cell(r)} | {', '.join(r.get('backends') or []) or '-'} | "
            f"{r['uncovered'][:60].replace('|', '/') or '-'} | "
            f"{finding.replace('|', '/')} |")
    defaults = [r for r in doc["problems"] if (r.get("ms") or {}).get(EAGER_DEFAULTS)]
    if defaults:  # the eager a user runs, beside the one the ratios above use
        lines += ["", "The ratios above compare with eager at the problem's precision (IEEE fp32). PyTorch's defaults "
                  "let cuDNN convolutions use TF32; the eager a user runs, timed beside it:", "",
                  "| problem | kernelwright ms | eager ms (IEEE fp32) | eager ms (PyTorch's defaults) | vs eager (IEEE) "
                  "| vs eager (defaults) |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['name']} | {_f(r['ms']['candidate'], '.4f')} | {_f(r['ms']['eager'], '.4f')} | "
                  f"{_f(r['ms'][EAGER_DEFAULTS], '.4f')} | {_f(r['speedup']['eager'], '.2f')}x | "
                  f"{_f(r['speedup'].get(EAGER_DEFAULTS), '.2f')}x |" for r in defaults]
    lines += _rewrite_summary(doc["problems"])
    return "\n".join(lines) + "\n"


def _rewrite_summary(problems: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per PTX rewrite pass set (search/rewrites.py): the rows where it was kept and by how much, and the rows where
    it was timed and not kept — each against its row's plain leader, timed in the same batch."""
    by_passes: dict[str, list[tuple[str, float | None, bool]]] = {}
    for r in problems:
        for t in r.get("ptx_rewrites") or ():
            by_passes.setdefault(" + ".join(t["passes"]), []).append((r["name"], t.get("speedup"), bool(t["kept"])))
    if not by_passes:
        return []
    lines = ["", "PTX rewrites of each row's tuned Triton leader, timed beside it (speedup over the plain kernel; "
             "kept where at least 1% faster, then verified):", "",
             "| passes | rows timed | kept on | speedup where kept | not kept on (speedup) |", "|---|---|---|---|---|"]
    for passes, trials in by_passes.items():
        won = [(n, x) for n, x, kept in trials if kept]
        lost = [(n, x) for n, x, kept in trials if not kept]
        gain = ", ".join(f"{n} {x:.3f}x" for n, x in won if x) or "-"
        rest = ", ".join(f"{n} {x:.3f}x" if x else f"{n} (not timed)" for n, x in lost[:8]) + (", …" if len(lost) > 8 else "")
        lines.append(f"| {passes} | {len(trials)} | {len(won)} | {gain} | {rest or '-'} |")
    return lines


# -- plots ---------------------------------------------------------------------------------------------------------
def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prologue: the SVG sits inside the HTML


def _message_figure(text: str) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=10, wrap=True)
    return _svg(fig)


def plot_speedups(problems: Sequence[Mapping[str, Any]]) -> str:
    import matplotlib.pyplot as plt

    timed = [r for r in problems if r["status"] == "passed" and r["timed"]]
    if not timed:
        return _message_figure("No timed passes: no speedups to draw.")
    names = [r["name"] for r in timed]
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(names) + 1.2))
    y = range(len(names))
    height = 0.38
    for offset, (b, colour) in zip((-height / 2, height / 2), (("eager", "#4c72b0"), ("compile", "#dd8452"))):
        values = [r["speedup"].get(b) or 0.0 for r in timed]
        ax.barh([i + offset for i in y], values, height=height, color=colour, label=f"vs {BASELINE_LABELS[b]}")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(list(y), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup (log scale; right of the line is faster)")
    ax.legend(loc="lower right", fontsize=8)
    return _svg(fig)


def plot_roofline(problems: Sequence[Mapping[str, Any]]) -> str:
    import matplotlib.pyplot as plt

    points = [r for r in problems if r["status"] == "passed" and r.get("arithmetic_intensity")
              and r.get("achieved_tflops")]
    if not points:
        return _message_figure("No timed passes with a work count: no roofline to draw.")
    ceilings = next((r["ceilings"] for r in points if r.get("ceilings")), {})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [r["arithmetic_intensity"] for r in points]
    lo, hi = min(xs) / 4, max(xs) * 4
    bandwidth = ceilings.get("copy_gbs")
    for dtype, tflops in sorted((ceilings.get("measured_tflops") or {}).items(), key=lambda kv: -kv[1]):
        ax.axhline(tflops, linestyle=":", linewidth=0.8, color="grey")
        ax.text(hi, tflops, f" {dtype} {tflops:.0f}", va="center", fontsize=7, color="grey")
    if bandwidth:  # the memory roof, up to the highest compute ceiling
        top = max((ceilings.get("measured_tflops") or {}).values(), default=float("inf"))
        grid = [lo * (hi / lo) ** (i / 50) for i in range(51)]
        ax.plot(grid, [min(bandwidth * x / 1e3, top) for x in grid], color="grey", linewidth=0.8,
                label=f"memory {bandwidth:.0f} GB/s (measured copy)")
    colours = ["#55a868" if r.get("tensor_core") else "#4c72b0" for r in points]
    ax.scatter(xs, [r["achieved_tflops"] for r in points], c=colours, s=18, zorder=3)
    for r in points:
        ax.annotate(r["name"], (r["arithmetic_intensity"], r["achieved_tflops"]), fontsize=6,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved TFLOP/s")
    if bandwidth:
        ax.legend(loc="upper left", fontsize=8)
    return _svg(fig)


def plot_fast_p(problems: Sequence[Mapping[str, Any]]) -> str:
    import matplotlib.pyplot as plt

    ps = [0.5 + 0.05 * i for i in range(51)]
    curves = {b: scores.fast_p_curve(problems, b, ps) for b in BASELINES}
    if all(v is None for c in curves.values() for v in c):
        return _message_figure("Nothing was timed: no fast_p curve.")
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for b, curve in curves.items():
        if any(v is not None for v in curve):
            ax.plot(ps, [100 * (v or 0.0) for v in curve], label=f"vs {BASELINE_LABELS[b]}")
    ax.axvline(1.0, color="black", linewidth=0.6)
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p: % of problems passed and faster than p")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    return _svg(fig)


def _tensor_cell(row: Mapping[str, Any]) -> str:
    """The tensor-core column: what executed (Nsight Compute), or the SASS's opcodes marked static where no
    profiled call could run."""
    text = ", ".join(row.get("tensor_core") or []) or "-"
    source = row.get("instructions_from") or ""
    return f"{text} (static)" if source.startswith("static") and row.get("tensor_core") else text


def plot_instruction_mix(problems: Sequence[Mapping[str, Any]]) -> str:
    import matplotlib.pyplot as plt

    mixed = [r for r in problems if r.get("instruction_mix")]
    if not mixed:
        return _message_figure("No instruction summaries (no kernel of kernelwright's was compiled).")
    classes: list[str] = []
    for r in mixed:
        for c in r["instruction_mix"]:
            if c not in classes:
                classes.append(c)
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(mixed) + 1.4))
    left = [0.0] * len(mixed)
    cmap = plt.get_cmap("tab20")
    for k, cls in enumerate(classes):
        shares = []
        for r in mixed:
            total = sum(r["instruction_mix"].values()) or 1
            shares.append(100 * r["instruction_mix"].get(cls, 0) / total)
        ax.barh(range(len(mixed)), shares, left=left, color=cmap(k % 20), label=cls, height=0.7)
        left = [a + b for a, b in zip(left, shares)]
    ax.set_yticks(range(len(mixed)), [r["name"] for r in mixed], fontsize=8)
    ax.invert_yaxis()
    executed = sum(1 for r in mixed if r.get("instructions_from") == "executed")
    ax.set_xlabel("% of the winning kernels' instructions: " + (
        "executed in the profiled call (Nsight Compute)" if executed == len(mixed) else
        "in the SASS (static)" if not executed else
        f"executed where profiled ({executed} of {len(mixed)} rows), else in the SASS"))
    ax.legend(fontsize=7, ncol=1 + len(classes) // 12, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _svg(fig)


PLOTS = (("speedup", "Speedup per problem", plot_speedups),
         ("roofline", "Roofline: arithmetic intensity against achieved throughput", plot_roofline),
         ("fast-p", "fast_p over p", plot_fast_p),
         ("instruction-mix", "Instruction classes of each winner", plot_instruction_mix))


# -- html -----------------------------------------------------------------------------------------------------------
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}.note{background:#fff4d6;padding:8px 12px;border-radius:4px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:20px}table{border-collapse:collapse;width:100%;font-size:12.5px}
th,td{border-bottom:1px solid #e6e6e6;padding:4px 6px;text-align:left;white-space:nowrap}
th{cursor:pointer;background:#f6f6f6;position:sticky;top:0}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.passed td:nth-child(2){color:#1b7a35}tr.failed td:nth-child(2){color:#b3261e}
figure.plot{margin:10px 0}figure.plot svg{max-width:100%;height:auto}.small{color:#666;font-size:12px}
"""

_SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var up = th.getAttribute('data-dir') !== 'up';
    table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-dir'); });
    th.setAttribute('data-dir', up ? 'up' : 'down');
    rows.sort(function (a, b) {
      var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
      var nx = parseFloat(x), ny = parseFloat(y);
      var r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
      return up ? r : -r;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def _cell(value: Any, text: str | None = None, *, num: bool = False) -> str:
    shown = html.escape(text if text is not None else ("-" if value is None else str(value)))
    sort = "" if value is None else html.escape(str(value), quote=True)
    return f'<td{" class=num" if num else ""} data-v="{sort}">{shown}</td>'


def _link(path: str | None, label: str, out: Path) -> str:
    if not path:
        return ""
    try:
        href = os.path.relpath(path, out)
    except ValueError:
        href = path
    return f'<a href="{html.escape(href, quote=True)}">{label}</a>'


def render_html(doc: Mapping[str, Any], out: Path) -> str:
    s, m = doc["summary"], doc["machine"]
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>kernelwright bench</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>kernelwright bench — {s['problems']} problems</h1>",
             f"<p class=small>{html.escape(str(m.get('device')))}, torch {html.escape(str(m.get('torch')))}, "
             f"triton {html.escape(str(m.get('triton')))}, kernelwright {html.escape(str(m.get('kernelwright')))}"
             f"; {html.escape(doc['created'])}; generator {html.escape(str(doc['settings'].get('generator')))}; "
             f"{doc['elapsed_s']:.0f} s{'; interrupted' if doc['interrupted'] else ''}.</p>"]
    if not doc["timed"]:
        parts.append(f"<p class=note>{html.escape(NOT_TIMED)}</p>")
    cards = [("problems", str(s["problems"])), ("fast_0 (passed)", _pct(s["fast_0"]))]
    if doc["timed"]:
        cards += [(f"geomean vs {BASELINE_LABELS[b]}", _f(s["geomean_speedup"][b], ".2f") + "x") for b in BASELINES]
        cards += [(f"fast_1.0 vs {BASELINE_LABELS[b]}", _pct(s["fast_p"][b]["1"])) for b in BASELINES]
        cards.append(("speed-of-light score", _f(s["sol_score"], ".2f")))
    cards.append(("exploits caught", str(len(s["exploits"]))))
    parts.append("<div class=cards>" + "".join(f"<div class=card>{html.escape(k)}<b>{html.escape(v)}</b></div>"
                                               for k, v in cards) + "</div>")
    if s["exploits"]:
        parts.append("<p>Exploits (scored as failures): " + "; ".join(
            f"<b>{html.escape(n)}</b> ({html.escape(f)})" for n, f in s["exploits"]) + "</p>")
    parts.append("<h2>Scoreboard</h2><p class=small>Click a column to sort.</p>")
    parts.append("<div style='overflow-x:auto'>" + _table(doc["problems"], out) + "</div>")
    for key, title, draw in PLOTS:
        parts.append(f"<h2>{html.escape(title)}</h2><figure class=plot data-plot={key}>{draw(doc['problems'])}"
                     "</figure>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(parts)


def _table(problems: Sequence[Mapping[str, Any]], out: Path) -> str:
    head = ["problem", "status", "kernelwright ms", "eager ms", "compile ms", "max-autotune ms", "vs eager",
            "vs compile", "vs max-autotune", "% floor", "SOL", "tensor cores", "in PyTorch", "finding", "files"]
    rows = ["<table class=sortable id=scoreboard><thead><tr>" + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>"]
    for r in problems:
        ms, sp = r["ms"], r["speedup"]
        finding = ", ".join(r.get("findings") or []) or (r["message"] if r["status"] != "passed" else "")
        cls = "passed" if r["status"] == "passed" else "failed"
        wait = set(r.get("pending") or ())
        cells = [_cell(r["name"]), _cell(r["status"]),
                 *(_cell(ms[k], "pending" if k in wait else _f(ms[k], ".4f"), num=True)
                   for k in ("candidate", *BASELINES)),
                 *(_cell(sp[b], "pending" if b in wait else _f(sp[b], ".2f") + "x" if sp[b] else "-", num=True)
                   for b in BASELINES),
                 _cell(r["percent_of_floor"], _f(r["percent_of_floor"], ".0f"), num=True),
                 _cell(r["sol_score"], _f(r["sol_score"], ".2f"), num=True),
                 _cell(", ".join(r["tensor_core"]) or None, _tensor_cell(r)),
                 _cell(r["uncovered"] or None, (r["uncovered"] or "-")[:70]),
                 _cell(finding or None, (finding or "")[:110])]
        links = " ".join(x for x in (_link(r.get("best_py"), "best.py", out), _link(r.get("report_md"),
                                                                                       "report.md", out)) if x)
        cells.append(f"<td>{links}</td>")
        rows.append(f"<tr class={cls}>" + "".join(cells) + "</tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)


def write_outputs(outcome: Any, out: Path, *, formats: Sequence[str] = ("json", "md", "html")) -> dict[str, Path]:
    """Write the requested outputs under ``out``; return their paths. HTML needs matplotlib (``pip install
    kernelwright[report]``): without it the JSON and markdown are still written and the caller says so."""
    out.mkdir(parents=True, exist_ok=True)
    doc = results_document(outcome)
    written: dict[str, Path] = {}
    path = out / "results.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    written["json"] = path
    if "md" in formats:
        written["md"] = out / "report.md"
        written["md"].write_text(markdown(doc))
    if "html" in formats:
        import matplotlib

        matplotlib.use("Agg")
        written["html"] = out / "report.html"
        written["html"].write_text(render_html(doc, out))
    return written
