#!/usr/bin/env bash
# Issue 44 on a GPU, in one device call: executed-instruction evidence under Nsight Compute — the GPU tests (a dead
# MMA branch, an honest bf16 GEMM, a 3xTF32 fp32 GEMM) and a CLI verify whose verdict prints its executed section,
# with the profiled call's cost in the verdict's phases. Logs stream to $OUT as they go.
#   bash scripts/gpu_executed.sh
set -u
STEP_LINES='^EXECUTED|^executed|candidate  |eager  |passed|failed|FAILED|ERROR|Error|took|dead-instruction|executed-'
. "$(dirname "$0")/gpu_common.sh" /tmp/gpu-executed-out
{ command -v ncu && ncu --version | tail -1; } | tee -a "$out/device.txt"
step executed-tests 240 python3 -m pytest -p no:xdist -p no:cacheprovider -q -rA -s tests/verify/test_executed_gpu.py \
  -m "gpu or not gpu"
step executed-cli 90 python3 -m kernelwright verify examples/problems/softmax_small.py examples/softmax_triton.py \
  --device cuda --no-compile-baseline
# Issue 43 item 3: timing that stops once the median is stable, against full-length timing, same pair in turn
# (timing_stable_rel is off by default until this has run: compare the medians, IQRs and reps of the two).
for rel in 0 0.002 0 0.002; do
  step "stable-timing-$rel" 90 env KERNELWRIGHT_TIMING_STABLE_REL=$rel python3 -m kernelwright verify problems/matmul.py \
    examples/matmul_triton.py --device cuda --no-executed --no-compile-baseline
done
echo "== done in $SECONDS s =="
