#!/usr/bin/env bash
# Nsight Compute evidence for rows of the benchmark table, in one device call: for each problem named, its latest
# verified winner is taken from the run database (benchmarks/results/bench-h200.sqlite) and run under ncu through
# `kernelwright inspect --executed --json` (DRAM / tensor-pipe throughput, occupancy, L1/L2 hit rates, spills):
#   bash scripts/gpu_ncu.sh SECONDS_EACH PROBLEM.py [PROBLEM.py ...]
# PROBLEM.py=CANDIDATE.py inspects that candidate instead (one the search timed but did not keep, say).
# 35 s a problem was too little (run 40); in run 43 each took 60-90 s (a verify without timing, about 45 s, then ncu):
# give each 100-120 s.
# A problem without a verified winner gets a 45 s search first. $OUT/ncu-summary.txt has one line a kernel; the
# reports (ncu-NAME.json, its .log, the searches' logs) are packed into $OUT/ncu-reports.tgz as each finishes (a
# device call returns at most 8 files: run 46 lost the ones past that).
set -u
cd "$(dirname "$0")/.."
each=${1:?seconds a problem}; shift
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-ncu-out}"
reports=/tmp/kw-ncu/reports
mkdir -p "$out" "$reports"
pack() { tar czf "$out/ncu-reports.tgz" -C "$reports" . 2>/dev/null; }
for arg in "$@"; do
  problem=${arg%%=*}
  name=$(basename "$problem" .py)
  if [ "$arg" != "$problem" ]; then
    name="$name-$(basename "${arg#*=}" .py)"
    cp "${arg#*=}" "/tmp/kw-ncu/$name.py" || continue
  else
    # The winner: the candidate of the problem's latest run whose verdict passed.
    # Without one (a row from before candidates were stored), a short search of its own writes one (60 s more).
    rm -f "/tmp/kw-ncu/$name.py"
    python3 - "$name" "/tmp/kw-ncu/$name.py" <<'PY'
import sqlite3, sys
from pathlib import Path
db = sqlite3.connect("benchmarks/results/bench-h200.sqlite")
row = db.execute("""select c.source from runs r join problems p on p.id = r.problem_id join candidates c on c.run_id = r.id
                    join verdicts v on v.id = c.verdict_id where p.name = ? and v.status = 'passed'
                    order by r.id desc, v.median_ms limit 1""", (sys.argv[1],)).fetchone()
if row is None:
    sys.exit(1)
Path(sys.argv[2]).write_text(row[0])
PY
  fi
  if [ ! -f "/tmp/kw-ncu/$name.py" ]; then
    echo "$name: no verified winner in the database: searching 45 s for one" >>"$out/ncu-summary.txt"
    timeout 120 python3 -m kernelwright optimize "$problem" --device cuda --budget 45s --out "/tmp/kw-ncu/run-$name" \
      >"$reports/optimize-$name.log" 2>&1 && cp "/tmp/kw-ncu/run-$name/best.py" "/tmp/kw-ncu/$name.py" \
      || { echo "$name: no winner from the search either (optimize-$name.log)" >>"$out/ncu-summary.txt"; pack; continue; }
  fi
  timeout --signal=INT --kill-after=20 "$each" python3 -m kernelwright inspect "/tmp/kw-ncu/$name.py" \
    --problem "$problem" --executed --json >"$reports/ncu-$name.json" 2>"$reports/ncu-$name.log"
  echo "== $name: exit $?" >>"$out/ncu-summary.txt"
  python3 - "$reports/ncu-$name.json" >>"$out/ncu-summary.txt" 2>&1 <<'PY'
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("   no report (cut by the time limit? ncu replays every kernel: give it minutes, not seconds)")
for k in (data.get("executed") or {}).get("kernels", []):
    # counts are summed over the kernel's launches (the driver calls the model twice): shown per launch here
    n = max(1, k.get("launches") or 1)
    keep = {key: k.get(key) for key in ("name", "launches", "grid", "block", "dram_throughput_pct",
                                         "tensor_pipe_pct", "achieved_occupancy_pct", "l1_hit_pct", "l2_hit_pct",
                                         "spill_instructions")}
    keep.update({f"{key}_per_launch": k.get(f"{key}_per_launch") or (k[key] / n if k.get(key) is not None else None)
                 for key in ("duration_ns", "dram_bytes")})
    print("  ", json.dumps(keep))
for f in (data.get("executed") or {}).get("findings", []):
    print("   finding:", json.dumps(f)[:300])
PY
  pack
done
cat "$out/ncu-summary.txt"
