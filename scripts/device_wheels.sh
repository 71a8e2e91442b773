#!/usr/bin/env bash
# The wheels the GPU machine's image lacks for the LLM generator (openai and what it needs beyond the image's own
# packages), downloaded here into .whl/ (kept out of git) at the versions this venv runs, for a device call that
# names .whl in `carry` and starts with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#     .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit;
# (the device README, "a Python package missing there"). Usage: bash scripts/device_wheels.sh [PYTHON]
set -eu
cd "$(dirname "$0")/.."
python=${1:-.venv/bin/python}
names="openai pydantic pydantic_core jiter annotated-types typing-inspection sniffio httpx2 httpcore2 truststore"
pins=$("$python" -m pip show $names 2>/dev/null | awk '/^Name:/{n=$2} /^Version:/{print n "==" $2}')
gitdir=$(git rev-parse --git-dir)
mkdir -p "$gitdir/info" && (grep -qx "/.whl/" "$gitdir/info/exclude" 2>/dev/null || echo /.whl/ >>"$gitdir/info/exclude")
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $pins
ls .whl
