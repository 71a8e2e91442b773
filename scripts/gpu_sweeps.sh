#!/usr/bin/env bash
# Several family sweeps in one device call, each cut by its own time limit, their rows gathered under $OUT:
#   bash scripts/gpu_sweeps.sh SECONDS_EACH "PROBLEM... [sweep options]" ["PROBLEM... [sweep options]" ...]
# e.g. bash scripts/gpu_sweeps.sh 120 "problems/matmul_bf16.py --configs 6 --grid variant=pointer,tma"
# Writes $OUT/sweeps.log (every row as it finishes) and $OUT/sweeps.json (all rows); the candidates stay in /tmp.
set -u
cd "$(dirname "$0")/.."
each=${1:?seconds a sweep}; shift
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-sweeps-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader \
  | tee -a "$out/sweeps.log"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/sweeps.log"
i=0
for job in "$@"; do
  i=$((i + 1))
  echo "== sweep $i: $job" >>"$out/sweeps.log"
  # shellcheck disable=SC2086  # the job is a word list on purpose
  timeout --signal=INT --kill-after=20 "$each" python3 scripts/family_sweep.py $job --out "/tmp/sweep-$i" \
    >>"$out/sweeps.log" 2>&1
  echo "== sweep $i: exit $?" >>"$out/sweeps.log"
done
python3 - "$i" "$out/sweeps.json" <<'PY'
import json, sys
from pathlib import Path
rows = []
for i in range(1, int(sys.argv[1]) + 1):
    path = Path(f"/tmp/sweep-{i}/family-sweep.json")
    if path.exists():
        rows += [{**row, "sweep": i} for row in json.loads(path.read_text())]
Path(sys.argv[2]).write_text(json.dumps(rows, indent=1))
PY
grep -v '^ \|^Traceback\|^  File' "$out/sweeps.log" | tail -80
