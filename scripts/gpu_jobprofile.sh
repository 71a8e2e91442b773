#!/usr/bin/env bash
# cProfile of one verify's parent and of each of its child jobs on the GPU machine (KERNELWRIGHT_PROFILE_JOBS):
#   bash scripts/gpu_jobprofile.sh PROBLEM [CANDIDATE]    (no candidate: the problem's Model as ModelNew)
# $OUT/profile.txt: the top functions by cumulative time, per process.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-jobprofile-out}"; mkdir -p "$out"
prof=/tmp/kw-prof && rm -rf "$prof" && mkdir -p "$prof"
problem=$1; cand=${2:-}; extra=()
if [ -z "$cand" ]; then
  cand="$prof/self.py"
  sed 's/\bclass Model(/class ModelNew(/; s/super(Model, self)/super(ModelNew, self)/' "$problem" >"$cand"
  extra=(--allow-library-only)
fi
KERNELWRIGHT_PROFILE_JOBS=$prof python3 -m cProfile -o "$prof/parent.prof" -m kernelwright verify "$problem" \
  "$cand" --device cuda --no-compile-baseline "${extra[@]}" 2>&1 | tail -4
python3 - "$prof" >"$out/profile.txt" <<'PY'
import glob, io, pstats, sys
for path in sorted(glob.glob(sys.argv[1] + "/*.prof")):
    s = io.StringIO()
    st = pstats.Stats(path, stream=s)
    st.sort_stats("cumulative").print_stats(45)
    print("=" * 30, path, "\n", s.getvalue()[-9000:])
PY
grep -E "^=|function calls" "$out/profile.txt"
