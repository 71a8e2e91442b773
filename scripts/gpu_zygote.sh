#!/usr/bin/env bash
# Issue 42 on a GPU, in one device call (ends inside 9 minutes): jobs forked from the warm zygote under CUDA (each
# opens its own context), their start against a fresh interpreter's side by side (scripts/bench_jobs.py), whole
# verifies both ways, the CLI's cold verify (a new process: its zygote starts with it) both ways, and the zygote's
# and the GPU verifier's tests through it. Logs stream to $OUT as they go.
#   bash scripts/gpu_zygote.sh [LEVEL-1 PROBLEM FILE ...]
set -u
STEP_LINES='^\||faster|verdict|took|passed|failed|FAILED|ERROR|Error'
. "$(dirname "$0")/gpu_common.sh" /tmp/gpu-zygote-out

# 1. The CLI's verify in a new process, as a user meets it: first with the zygote (it starts with the process),
#    then with a fresh interpreter per job; the first call on the machine is the cold one.
STEP_LINES="$STEP_LINES|zygote|child "  # --verbose: when the zygote served, each job's wall and whether it forked
step cli-zygote-cold 150 python3 -m kernelwright verify examples/problems/softmax_small.py examples/softmax_triton.py \
  --device cuda --verbose
step cli-fresh 150 env KERNELWRIGHT_JOB_ZYGOTE=0 python3 -m kernelwright verify examples/problems/softmax_small.py \
  examples/softmax_triton.py --device cuda
step cli-zygote-warm 150 python3 -m kernelwright verify examples/problems/softmax_small.py examples/softmax_triton.py \
  --device cuda
# 2. One job and whole verifies, forked against fresh, interleaved in one process (the zygote's start its own row).
step bench-jobs 200 python3 scripts/bench_jobs.py --device cuda --runs 3 --verifies 1 --problem problems/softmax.py \
  --candidate examples/softmax_triton.py
# 3. Level-1 problems at full size (KernelBench's files, carried unmodified in .out/kb), each judged against its own
#    Model renamed ModelNew (--allow-library-only: the harness's cost, no candidate compile), forked then fresh.
for problem in "$@"; do
  # (the device tool brings back 8 files: the level-1 files' own go to /tmp, their verdicts' lines to the log)
  name=$(basename "$problem" .py); self="/tmp/$name-self.py"
  sed 's/\bclass Model(/class ModelNew(/; s/super(Model, self)/super(ModelNew, self)/' "$problem" >"$self"
  for mode in zygote fresh; do
    z=1; [ "$mode" = fresh ] && z=0
    s=$SECONDS
    KERNELWRIGHT_JOB_ZYGOTE=$z timeout --signal=INT --kill-after=15 120 python3 -m kernelwright verify "$problem" \
      "$self" --json --device cuda --no-compile-baseline --allow-library-only >"/tmp/l1-$name-$mode.json" \
      2>"/tmp/l1-$name-$mode.err"
    echo "== l1 $name $mode: exit $?, $((SECONDS - s)) s wall =="
    tail -4 "/tmp/l1-$name-$mode.err" | cut -c1-400
    python3 - "/tmp/l1-$name-$mode.json" <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
    print(f"verdict {v['status']} in {v['duration_s']:.1f} s; phases", json.dumps(v.get("phases")))
except Exception as exc:  # noqa: BLE001
    print("no verdict:", exc)
PY
  done
done
# 4. The zygote's tests and the GPU verifier's, forked: one pytest start (run 63 passed them; here only if time is left).
[ "$SECONDS" -lt 380 ] && step gpu-tests 150 python3 -m pytest -p no:xdist -p no:cacheprovider -q -rA --durations=8 \
  tests/isolation/test_zygote.py tests/verify/test_verify_gpu.py -m "gpu or not gpu" \
  -k "zygote or forked or honest_kernel_is_timed or illegal_address"
echo "== done in $SECONDS s =="
