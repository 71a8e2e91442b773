#!/usr/bin/env bash
# Where a verify's time goes on the GPU machine, one device call: process start-up costs (import torch, the CUDA
# context, kernelwright's imports), then `kernelwright verify --json` of level-1 problems at full size, one at a
# time, each verdict's phases into $OUT/profile.jsonl as it finishes (a cut call still returns them).
#   bash scripts/gpu_profile.sh SECONDS PROBLEM=CANDIDATE|PROBLEM ...
# A PROBLEM without a candidate is judged against its own Model renamed ModelNew (--allow-library-only): the
# harness's own cost, no candidate compile. An item prefixed "old:" runs with this session's speed-ups off
# (no prestarted children, judging on the host, scratch files on disk): before and after in one call.
set -u
cd "$(dirname "$0")/.."
limit=${1:?seconds}; shift
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-profile-out}"; mkdir -p "$out"
work=/tmp/kw-profile && rm -rf "$work" && mkdir -p "$work"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
nproc; df -h /tmp | tail -1
t() { local s=$EPOCHREALTIME; "$@" >/dev/null 2>&1; awk -v a="$s" -v b="$EPOCHREALTIME" -v c="$*" 'BEGIN { printf "%.2f s: %s\n", b - a, c }'; }
{
t python3 -c "import torch"
t python3 -c "import torch"
t python3 -c "import torch; torch.zeros(1, device='cuda')"
t python3 -c "import torch, triton"
t python3 -c "import kernelwright.verify.verifier"
t python3 -c "import kernelwright.verify.child.candidate, kernelwright.verify.reference, kernelwright.verify.baseline"
} | tee "$out/startup.txt"
start=$SECONDS
for item in "$@"; do
  left=$((limit - (SECONDS - start)))
  [ "$left" -lt 30 ] && { echo "skip $item: ${left} s left"; continue; }
  mode=new; envs=()
  case "$item" in old:*) mode=old; item=${item#old:}
    envs=(KERNELWRIGHT_PRESTART=0 KERNELWRIGHT_JUDGE_ON_DEVICE=0 TMPDIR=/tmp);; esac
  problem=${item%%=*}; cand=${item#*=}; extra=()
  if [ "$cand" = "$item" ]; then
    cand="$work/$(basename "$problem" .py)_self.py"
    sed 's/\bclass Model(/class ModelNew(/; s/super(Model, self)/super(ModelNew, self)/' "$problem" >"$cand"
    extra=(--allow-library-only)
  fi
  name=$(basename "$problem" .py)-$mode
  s=$SECONDS
  env "${envs[@]}" timeout --signal=INT --kill-after=20 "$left" python3 -m kernelwright verify "$problem" "$cand" --json \
     --device cuda --no-compile-baseline --progress "$out/progress-$name.jsonl" "${extra[@]}" \
     >"$work/$name.json" 2>"$work/$name.err"
  rc=$?
  python3 - "$work/$name.json" "$name" "$((SECONDS - s))" "$rc" >>"$out/profile.jsonl" <<'PY'
import json, sys
path, name, wall, rc = sys.argv[1:]
try:
    v = json.load(open(path))
except Exception as exc:
    v = {"error": repr(exc)}
print(json.dumps({"problem": name, "date": __import__("time").strftime("%Y-%m-%d %H:%M UTC", __import__("time").gmtime()), "wall_s": int(wall), "rc": int(rc), "status": v.get("status"),
                  "phases": v.get("phases"), "duration_s": v.get("duration_s"),
                  "timing": {k: (m or {}).get("median_ms") for k, m in (v.get("timing") or {}).items()}}))
PY
  tail -1 "$out/profile.jsonl"; tail -3 "$work/$name.err"
done
cat "$work"/*.err > "$out/errors.txt" 2>/dev/null
