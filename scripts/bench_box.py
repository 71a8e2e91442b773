"""What a job's box costs at its start (issue 41): the keeper, the namespaces and mounts, the capability drop, around
a bare interpreter, against the bare interpreter alone, side by side in one run. Prints a table.

    python scripts/bench_box.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOX = Path(__file__).resolve().parents[1] / "src" / "kernelwright" / "isolation" / "box.py"
BARE = [sys.executable, "-I", "-S", "-c", "pass"]


def _boxed(plan: dict) -> float:
    read_fd, write_fd = os.pipe()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-S", str(BOX), json.dumps({**plan, "control_fd": write_fd}), "--", *BARE],
                   pass_fds=(write_fd,), check=True)
    seconds = time.perf_counter() - started
    os.close(write_fd)
    report = json.loads(os.read(read_fd, 1 << 16))
    os.close(read_fd)
    assert report["exit"] == 0, report
    return seconds


def _bare() -> float:
    started = time.perf_counter()
    subprocess.run(BARE, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        cache, work = Path(tmp, "cache"), Path(tmp, "work")
        cache.mkdir()
        work.mkdir()
        untrusted = {"readonly": [str(cache)], "hide": [tempfile.gettempdir()], "keep": [str(work), sys.prefix]}
        cases = [("bare interpreter", _bare), ("box: namespace", lambda: _boxed({"mode": "auto"})),
                 ("box: namespace, untrusted view", lambda: _boxed({"mode": "auto", **untrusted})),
                 ("box: subreaper", lambda: _boxed({"mode": "subreaper"}))]
        times: dict[str, list[float]] = {name: [] for name, _ in cases}
        for _ in range(runs):  # interleaved, so a loaded machine weighs on every case alike
            for name, run in cases:
                times[name].append(run())
    base = statistics.median(times["bare interpreter"])
    print(f"| start of a job ({runs} runs, interleaved) | median ms | min ms | added to the bare start, ms |")
    print("|---|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median * 1e3:.1f} | {min(values) * 1e3:.1f} | {(median - base) * 1e3:+.1f} |")


if __name__ == "__main__":
    main()
