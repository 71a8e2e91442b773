#!/usr/bin/env bash
# Issue 41 on a GPU, in one device call (ends inside 9 minutes): the job box under CUDA (PID and mount namespaces,
# no capabilities), one full verify with timing through it (its phases), the boundary's GPU cases (a forged timing),
# the verifier's GPU tests and the sanitizer under the box. Logs stream to $OUT as they go.
#   bash scripts/gpu_boundary.sh
set -u
STEP_LINES='verdict|took|kernels|timing|box|containment|CASE|PASSED|FAILED|ERROR|passed|failed|Error'
. "$(dirname "$0")/gpu_common.sh" /tmp/gpu-boundary-out

# 1. A cold verify through the box (the first job on the machine), then a warm one: phases and verdict.
step verify-cold 150 python3 -m kernelwright verify examples/problems/softmax_small.py examples/softmax_triton.py \
  --device cuda
step verify-warm 120 python3 -m kernelwright verify examples/problems/softmax_small.py examples/softmax_triton.py \
  --device cuda
# 2. The box's own tests, the boundary's GPU case, the verifier's GPU tests, one sanitizer tool: one pytest start.
step gpu-tests 330 python3 -m pytest -p no:xdist -p no:cacheprovider -q -s -rA --durations=10 \
  tests/isolation/test_box.py tests/adversarial/test_boundary.py tests/verify/test_verify_gpu.py \
  tests/verify/test_sanitize_gpu.py -m "gpu or not gpu" \
  -k "box or (forged and timing) or honest_kernel_is_timed or illegal_address or unwritten or honest_kernel_is_clean"
echo "== done in $SECONDS s =="
