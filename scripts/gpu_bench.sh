#!/usr/bin/env bash
# kernelwright bench on the GPU machine, in one device call that stops itself before the call's limit:
#   bash scripts/gpu_bench.sh SECONDS [bench options...]       e.g. 500 problems --jobs 3 --budget-per-problem 5m
# A problem's budget includes its verify (60-100 s alone on the H200) and, with --jobs, its waits for the GPU lock
# (rows took 190-363 s at --jobs 4 in run 16): under about 4 minutes a problem, verifies are cut (timeout rows).
# The run database travels with the repository (benchmarks/results/bench-h200.sqlite): finished rows and cached
# baseline timings accumulate across calls and sessions (--resume skips a row finished by the same code: a change
# to kernelwright's sources re-measures it; baselines are reused whatever changed). After the call, copy $OUT/bench-h200.sqlite
# over it and commit it; $OUT also holds bench.log and bench-runs.tgz (results.json, report.md, report.html and the
# problems' folders): three files, as a device call returns at most 8.
set -u
cd "$(dirname "$0")/.."
limit=${1:?seconds}; shift
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-bench-out}"
db=benchmarks/results/bench-h200.sqlite
mkdir -p "$out"
work=/tmp/kw-bench && rm -rf "$work" && mkdir -p "$work"
[ -f "$db" ] && cp "$db" "$work/runs.sqlite"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
# Where a verify's host time may go (its references and outputs are files): the disks and the cores, in ~10 s.
df -h /tmp /dev/shm 2>/dev/null | tail -n +2; nproc
python3 - <<'PY' 2>&1 | tail -3
import os, tempfile, time, torch
x = torch.randn(256 * 2**20, dtype=torch.float64)  # 2 GiB, a big problem's float64 reference
for root in ("/tmp", "/dev/shm"):
    if not os.path.isdir(root):
        continue
    path = tempfile.mktemp(dir=root)
    t = time.perf_counter(); torch.save(x, path); w = time.perf_counter() - t
    t = time.perf_counter(); torch.load(path); r = time.perf_counter() - t
    os.unlink(path)
    print(f"{root}: torch.save 2 GiB {w:.2f} s, torch.load {r:.2f} s")
PY
start=$SECONDS
# Into a file, not a pipe: a process left behind by a cut run would hold a pipe open, and the call with it.
timeout --signal=INT --kill-after=90 "$limit" python3 -m kernelwright bench --resume --db "$work/runs.sqlite" \
  --out "$work/bench" --device cuda "$@" >"$out/bench.log" 2>&1
echo "== bench: exit $?, $((SECONDS - start)) s =="
grep -v '^bench ' "$out/bench.log" | tail -5; grep '^bench ' "$out/bench.log" | tail -1
cp "$work/runs.sqlite" "$out/bench-h200.sqlite"
tar czf "$out/bench-runs.tgz" -C "$work" bench --exclude='*.so' --exclude='__pycache__' 2>/dev/null
cat "$work/bench/report.md" 2>/dev/null | tail -45
