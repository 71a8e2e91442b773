#!/usr/bin/env bash
# Issue 43's trial groups on a GPU: level-1 files whose trials' files cannot all fit /dev/shm (the scratch guard
# refused them before: 41_Max_Pooling_1D 12 GB a trial, 23_Softmax 24 GB), each verified at full size against its
# own Model renamed ModelNew, so every verdict must be a pass at 1.00x eager. One device call, inside 9 minutes;
# each verify's log streams to $OUT (its trial-groups note names the groups; its phases say where the time went).
#   [KW_LIMIT=SECONDS] bash scripts/gpu_groups.sh LEVEL-1 PROBLEM FILE ...   (carry them: an ignored folder, .out/kb)
# KW_LIMIT (default 520): the seconds this script may take, for a call that runs something before it.
set -u
STEP_LINES='verdict|took|passed|failed|rejected|incorrect|error|trial-groups|phases|groups|GB|Error|killed'
. "$(dirname "$0")/gpu_common.sh" /tmp/gpu-groups-out
df -h /dev/shm /tmp | tee -a "$out/device.txt"; free -g | tee -a "$out/device.txt"
# Few files come back from a device call: the summary in $OUT, each verify's log and verdict in groups.tgz.
summary="$out/groups-summary.txt"; out_top=$out; out=$(mktemp -d /tmp/kw-groups-XXXX)
for problem in "$@"; do
  name=$(basename "$problem" .py); self="/tmp/$name-self.py"
  sed 's/\bclass Model(/class ModelNew(/; s/super(Model, self)/super(ModelNew, self)/' "$problem" >"$self"
  left=$((${KW_LIMIT:-520} - 10 - SECONDS)); [ "$left" -lt 60 ] && { echo "== $name: skipped, $left s left =="; continue; }
  step "verify-$name" "$left" bash -c 'python3 -m kernelwright verify "$@" >"$0"' "$out/verdict-$name.json" \
    "$problem" "$self" --device "${KW_DEVICE:-cuda}" --verbose --no-compile-baseline --allow-library-only --json
  python3 - "$out/verdict-$name.json" <<'PY' 2>&1 | tee -a "$summary"
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as exc:
    sys.exit(f"no verdict: {exc}")
groups = next((f for f in v["findings"] if f["code"] == "trial-groups"), None)
print(v["problem"].rsplit("/", 1)[-1], v["status"], v["message"][:160])
print("  groups:", groups["details"]["groups"] if groups else "none", "kept:", groups["details"]["kept"] if groups else "-")
print("  trials:", sum(t["status"] == "ok" for t in v["trials"]), "ok of", len(v["trials"]),
      "| duration", round(v["duration_s"], 1), "s | phases", v["phases"])
PY
  tar czf "$out_top/groups.tgz" -C "$out" . 2>/dev/null
done
echo "== done in $SECONDS s =="
