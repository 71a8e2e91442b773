#!/usr/bin/env bash
# The suite benchmark on the GPU machine, in one device call that stops itself before the call's limit:
#   bash scripts/gpu_suite.sh SECONDS [suite.py run options...]     e.g. 520 --budget 30s --jobs 4
# Results accumulate in benchmarks/results/suite-h200.json (tracked: copy the returned $OUT/suite.json over it after
# each call and commit it), so several short calls — across sessions — build one table; the runs' best.py,
# verdict.json and report.md files come back in $OUT/suite-runs.tgz (keep the passed rows' in benchmarks/results/runs
# for the do_bench cross-check).
set -u
cd "$(dirname "$0")/.."
limit=${1:?seconds}; shift
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-suite-out}"
results=benchmarks/results/suite-h200.json
mkdir -p "$out" /tmp/suite-runs
[ -f "$results" ] && cp "$results" "$out/suite.json"
cp -r benchmarks/results/runs/. /tmp/suite-runs/ 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
start=$SECONDS
# Into a file, not a pipe: a process left behind by a cut run would hold a pipe open, and the call with it.
timeout --signal=INT --kill-after=60 "$limit" python3 benchmarks/suite.py run --results "$out/suite.json" \
  --out /tmp/suite-runs --skip-done "$@" >"$out/suite.log" 2>&1
grep -E '^\{|Error|error' "$out/suite.log" | cut -c1-400
echo "== suite: $((SECONDS - start)) s =="
python3 benchmarks/suite.py merge --results "$out/suite.json"  # a parallel run cut short leaves part files
tar czf "$out/suite-runs.tgz" -C /tmp suite-runs --exclude='*.so' --exclude='__pycache__' 2>/dev/null
python3 benchmarks/suite.py table --results "$out/suite.json"
