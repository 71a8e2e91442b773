#!/usr/bin/env bash
# Issue 44 on a GPU, in one device call: executed-instruction evidence under Nsight Compute — the GPU tests (a dead
# MMA branch, an honest bf16 GEMM, a 3xTF32 fp32 GEMM) and a CLI verify whose verdict prints its executed section,
# with the profiled call's cost in the verdict's phases. Logs stream to $OUT as they go.
#   bash scripts/gpu_executed.sh
set -u
STEP_LINES='^EXECUTED|^executed|passed|failed|FAILED|ERROR|Error|took|dead-instruction|executed-'
. "$(dirname "$0")/gpu_common.sh" /tmp/gpu-executed-out
{ command -v ncu && ncu --version | tail -1; } | tee -a "$out/device.txt"
step executed-tests 240 python3 -m pytest -p no:xdist -p no:cacheprovider -q -rA -s tests/verify/test_executed_gpu.py \
  -m "gpu or not gpu"
step executed-cli 90 python3 -m kernelwright verify examples/problems/softmax_small.py examples/softmax_triton.py \
  --device cuda --no-compile-baseline
echo "== done in $SECONDS s =="
