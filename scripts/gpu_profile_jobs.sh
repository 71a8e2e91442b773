#!/usr/bin/env bash
# Where a GPU verify's jobs spend their time (issue 42: a forked reference job took 9-11 s on the H100 in run 65,
# 0.6 s on the CPU), and issue 44's dead-branch GPU test with its candidate fixed. One device call, inside 9 minutes;
# logs stream to $OUT as they go (each job's cProfile is read here and printed, the .prof files stay in /tmp).
#   bash scripts/gpu_profile_jobs.sh [LEVEL-1 PROBLEM FILE ...]
set -u
STEP_LINES='verdict|took|passed|failed|FAILED|ERROR|Error|child |zygote'
. "$(dirname "$0")/gpu_common.sh" /tmp/gpu-profile-out
profiles() {  # folder, log: the top of each job's profile by cumulative time
  python3 - "$1" >"$2" 2>&1 <<'PY'
import glob, io, pstats, sys
for path in sorted(glob.glob(sys.argv[1] + "/*.prof")):
    text = io.StringIO()
    stats = pstats.Stats(path, stream=text)
    print(f"=== {path.rsplit('/', 1)[-1]}: {stats.total_tt:.2f} s")
    stats.sort_stats("cumulative").print_stats(40)
    print("\n".join(line[:200] for line in text.getvalue().splitlines()[6:]))
PY
  grep -E "^===" "$2"
}
step executed-tests 240 python3 -m pytest -p no:xdist -p no:cacheprovider -q -rA -s tests/verify/test_executed_gpu.py \
  -m "gpu or not gpu"
prof=/tmp/kw-prof-softmax; rm -rf "$prof"; mkdir -p "$prof"
step verify-softmax 120 env KERNELWRIGHT_PROFILE_JOBS="$prof" python3 -m kernelwright verify \
  examples/problems/softmax_small.py examples/softmax_triton.py --device cuda --verbose --no-compile-baseline
profiles "$prof" "$out/profile-softmax.txt"
for problem in "$@"; do  # a level-1 file at full size, judged against its own Model renamed ModelNew
  name=$(basename "$problem" .py); self="/tmp/$name-self.py"
  sed 's/\bclass Model(/class ModelNew(/; s/super(Model, self)/super(ModelNew, self)/' "$problem" >"$self"
  prof="/tmp/kw-prof-$name"; rm -rf "$prof"; mkdir -p "$prof"
  step "verify-$name" 180 env KERNELWRIGHT_PROFILE_JOBS="$prof" python3 -m kernelwright verify "$problem" "$self" \
    --device cuda --verbose --no-compile-baseline --allow-library-only
  profiles "$prof" "$out/profile-$name.txt"
  [ "$SECONDS" -gt 420 ] && break
done
echo "== done in $SECONDS s =="
