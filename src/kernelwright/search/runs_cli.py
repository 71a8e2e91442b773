"""``kernelwright runs``: past search runs from the run database.

    kernelwright runs                        # the newest runs: status, candidates, best time, LLM tokens and cost
    kernelwright runs show 12                # one run: settings, candidates, LLM usage, summary (scaling curve)
    kernelwright runs --db runs.sqlite --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelwright.errors import InputError
from kernelwright.search.cli import positive_int

HELP = "list past search runs, or show one: settings, candidates, LLM usage, summary"


def _shared_options(parser: argparse.ArgumentParser, *, nested: bool) -> None:
    # Accepted before and after 'show'; the nested copies leave the outer value alone unless given.
    default: Any = argparse.SUPPRESS if nested else None
    parser.add_argument("--db", type=Path, default=default,
                        help="the run database (default: runs.sqlite in the kernelwright cache, "
                        "$KERNELWRIGHT_CACHE_DIR or ~/.cache/kernelwright)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS if nested else False,
                        help="print JSON instead of text")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _shared_options(parser, nested=False)
    parser.add_argument("--limit", type=positive_int, default=20, help="how many runs to list (default 20)")
    sub = parser.add_subparsers(dest="runs_command", metavar="[show RUN_ID]", parser_class=type(parser))
    show = sub.add_parser("show", help="one run in detail", description="one run in detail: settings, candidates, "
                          "LLM usage and summary")
    show.add_argument("run_id", type=int, help="the run's id (first column of 'kernelwright runs')")
    show.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                      help="log progress and show tracebacks")
    _shared_options(show, nested=True)


def run(args: argparse.Namespace) -> int:
    from kernelwright.search.db import RunDB, default_path

    path = args.db or default_path()
    if not path.exists():
        raise InputError(f"no runs yet at {path} (search runs are recorded there; --db PATH reads another file)")
    with RunDB(path, create=False) as db:
        if getattr(args, "runs_command", None) == "show":
            return _show(db, args.run_id, as_json=args.json)
        return _list(db, limit=args.limit, as_json=args.json)


# ----------------------------------------------------------------------------------------------------- list


def _list(db: Any, *, limit: int, as_json: bool) -> int:
    runs = db.runs(limit)
    if as_json:
        print(json.dumps([dataclasses.asdict(r) for r in runs], indent=2))
        return 0
    if not runs:
        print(f"no runs recorded in {db.path}")
        return 0
    rows = [(str(r.id), _when(r.started), r.problem_name, f"{r.generator}/{r.strategy}", r.status,
             str(r.candidates), str(r.passed), _ms(r.best_ms), _speedup(r.best_speedup),
             f"{r.tokens:,}" if r.llm_calls else "-", _cost(r.cost_usd)) for r in runs]
    print(_table(("id", "started", "problem", "generator/strategy", "status", "candidates", "passed", "best ms",
                  "vs eager", "LLM tokens", "cost"), rows, right=(0, 5, 6, 7, 8, 9, 10)))
    return 0


# ----------------------------------------------------------------------------------------------------- show


def _show(db: Any, run_id: int, *, as_json: bool) -> int:
    row = db.run(run_id)
    candidates = db.candidates(run_id)
    usage = db.llm_usage(run_id)
    if as_json:
        print(json.dumps({
            "run": dataclasses.asdict(row),
            "candidates": [{k: v for k, v in dataclasses.asdict(c).items() if k != "source"} for c in candidates],
            "llm_usage": usage,
        }, indent=2, default=str))
        return 0
    print("\n".join(_describe(row, candidates, usage)))
    return 0


def _describe(row: Any, candidates: Sequence[Any], usage: Mapping[str, Any]) -> list[str]:
    wall = _duration((row.finished or time.time()) - row.started)
    lines = [
        f"run {row.id}: {row.problem_name} ({row.problem_path}, sha256 {row.problem_sha256[:12]})",
        f"  status     {row.status}" + (f" (resumed {row.resumes}x)" if row.resumes else ""),
        f"  started    {_when(row.started)}; " + (f"finished {_when(row.finished)}; wall {wall}" if row.finished
                                                  else f"{wall} so far"),
        f"  search     generator {row.generator}, strategy {row.strategy}",
        f"  target     {row.arch} on {row.device}",
        f"  toolchain  {row.toolchain}",
        f"  process    pid {row.pid} on {row.host}",
        "",
        "settings",
        *_render_mapping(row.settings, indent=2),
        "",
        "LLM usage",
        f"  {_usage_line(usage)}",
        "",
    ]
    passed = sum(c.status == "passed" for c in candidates)
    lines.append(f"candidates ({len(candidates)}, {passed} passed)")
    if candidates:
        table = _table(
            ("id", "origin", "lineage", "round", "parent", "status", "ms", "vs eager"),
            [(str(c.id), c.origin, str(c.lineage), str(c.round),
              "+".join(str(p) for p in (c.parent_id, c.parent2_id) if p is not None) or "-",
              c.status, _ms(c.median_ms), _speedup(c.speedup_eager)) for c in candidates],
            right=(0, 2, 3, 6, 7))
        lines += ["  " + line for line in table.splitlines()]
    lines += ["", "summary"]
    lines += _render_mapping(row.summary, indent=2) if row.summary else ["  (none yet)"]
    return lines


def _usage_line(usage: Mapping[str, Any]) -> str:
    if not usage["calls"]:
        return "no LLM calls"
    failed = f" ({usage['failures']} failed)" if usage["failures"] else ""
    calls = f"{usage['calls']} call" + ("" if usage["calls"] == 1 else "s")
    return (f"{calls}{failed}, {usage['tokens']:,} tokens ({usage['prompt_tokens']:,} prompt + "
            f"{usage['completion_tokens']:,} completion), cost {_cost(usage['cost_usd'])}, "
            f"{usage['latency_s']:.1f} s waiting")


def _render_mapping(mapping: Mapping[str, Any], *, indent: int) -> list[str]:
    """Any JSON the loop stored, readable: scalars as ``key: value``, a list of records as a table."""
    pad = " " * indent
    lines: list[str] = []
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            lines.append(f"{pad}{key}:")
            lines += _render_mapping(value, indent=indent + 2) if value else [f"{pad}  (empty)"]
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            columns = list(dict.fromkeys(k for v in value for k in v))
            lines.append(f"{pad}{key}:")
            table = _table(columns, [[_scalar(v.get(c)) for c in columns] for v in value])
            lines += [f"{pad}  {line}" for line in table.splitlines()]
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: {', '.join(_scalar(v) for v in value) or '(none)'}")
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return lines


# ----------------------------------------------------------------------------------------------------- text


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _speedup(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _cost(value: float | None) -> str:
    return f"${value:.4f}" if value is not None else "-"
