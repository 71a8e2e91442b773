# Sourced by the scripts/gpu_*.sh that run one issue's GPU work in one device call: the repository's sources on
# the path, $out made (the device's $OUT, else the given folder), the device's facts in $out/device.txt, and
# `step NAME LIMIT COMMAND...` (a step's log in $out/NAME.log, the lines matching $STEP_LINES shown).
#   . "$(dirname "$0")/gpu_common.sh" /tmp/gpu-NAME-out
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
out="${OUT:-$1}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/device.txt"
{ id; echo "cores: $(nproc)"; } | tee -a "$out/device.txt"
STEP_LINES=${STEP_LINES:-'verdict|took|passed|failed|FAILED|ERROR|Error'}

step() {  # name, limit, command...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "== $name (limit ${limit}s) =="
  timeout --signal=INT --kill-after=15 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  grep -E "$STEP_LINES" "$out/$name.log" | cut -c1-300 | tail -30
  echo "== $name: exit $rc, $((SECONDS - start)) s =="
}
