#!/usr/bin/env bash
# The GPU machine's checks, in named groups, for one device-tool call each:
#   bash scripts/gpu_checks.sh validate verify-tests inspect-tests
#   bash scripts/gpu_checks.sh adversarial-a
# Each group has its own time limit (so one slow step cannot eat the call), streams its log, and ends with one
# summary line; everything is packed into $OUT/gpu-checks.tgz (the device tool returns at most 8 files).
# Results go to docs/gpu-validation.md by hand, with the date and the device.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-checks-out}"
logs=/tmp/gpu-checks
mkdir -p "$out" "$logs"
pytest_gpu=(python3 -m pytest -m gpu -p no:xdist -p no:cacheprovider -q -s -rA --durations=15)
# The adversarial corpus's GPU cases in four quarters that fit one device call each with room to spare: a case is a
# full protocol run, ~25 s on the H200, plus ~90 s of pytest start-up per group (measured 2026-11-30, run 13).
# First the honest look-alikes and the cases the own-kernel accounting decides.
adversarial_a="honest or library-in or library-named"
adversarial_b="library-on or raw-thread or timed or beyond or redundant"
adversarial_c="stale or side or background-thread or timer or caching"
adversarial_d="precision or uninitialised or persisting"

run_group() {
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "== $name (limit ${limit}s) =="
  timeout --signal=INT --kill-after=15 "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  # The lines worth reading in the reply: tables, verdict lines, pytest's summary.
  grep -E '^(case|softmax|matmul|vector_add|layernorm|gelu_mul|  +status=|\[|CASE|PASSED|FAILED|ERROR|[0-9]+ (passed|failed))|passed|failed' \
    "$logs/$name.log" | cut -c1-300 | tail -40
  echo "== $name: exit $rc, $((SECONDS - start)) s =="
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
for group in "$@"; do
  case $group in
    validate) run_group validate 300 python3 scripts/gpu_validate.py --out "$logs/validate" --cases softmax,matmul ;;
    verify-tests) run_group verify-tests 330 "${pytest_gpu[@]}" tests/verify ;;  # ~150 s + a CUDA extension build
    inspect-tests) run_group inspect-tests 120 "${pytest_gpu[@]}" tests/inspect tests/hardware ;;
    adversarial-a) run_group adversarial-a 280 "${pytest_gpu[@]}" tests/adversarial -k "$adversarial_a" ;;
    adversarial-b) run_group adversarial-b 280 "${pytest_gpu[@]}" tests/adversarial -k "$adversarial_b" ;;
    adversarial-c) run_group adversarial-c 280 "${pytest_gpu[@]}" tests/adversarial -k "$adversarial_c" ;;
    adversarial-d) run_group adversarial-d 240 "${pytest_gpu[@]}" tests/adversarial -k "$adversarial_d" ;;
    export-tests) run_group export-tests 240 "${pytest_gpu[@]}" tests/export ;;
    llm-tests) run_group llm-tests 150 "${pytest_gpu[@]}" tests/llm ;;
    optimize-tests) run_group optimize-tests 200 "${pytest_gpu[@]}" tests/search ;;
    *) echo "unknown group: $group (see the case list in $0)"; exit 2 ;;
  esac
done
tar czf "$out/gpu-checks.tgz" -C /tmp gpu-checks
