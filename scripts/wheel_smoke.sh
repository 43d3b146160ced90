#!/usr/bin/env bash
# Builds the wheel, installs it into a clean venv outside the checkout and runs the README
# tour from an empty directory: what a user gets from `pip install cake_kernels-*.whl`.
# Called by .ci/run after `make test`; needs the dependencies from the package index.
# PYTHON (default .venv/bin/python) builds the wheel and must have `build` installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cake-wheel-smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# setuptools builds in ./build, and a stale copy there would end up in the wheel.
rm -rf build
"$PYTHON" -m build --wheel --outdir "$tmp/dist" . >"$tmp/build.log" 2>&1 \
    || { cat "$tmp/build.log"; exit 1; }
rm -rf build
wheel=$(ls "$tmp"/dist/cake_kernels-*.whl)
echo "== built $(basename "$wheel")"

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet "$wheel"
export PATH="$tmp/venv/bin:$PATH"
unset PYTHONPATH VIRTUAL_ENV

mkdir "$tmp/work"
cd "$tmp/work"
step() { echo "== $*"; "$@"; }
echo "== the packages come from the venv, not the checkout"
python - <<'PY'
import sys

import cake_core, cake_kmeans, cake_tactics

for m in (cake_core, cake_tactics, cake_kmeans):
    print(m.__name__, m.__file__)
    if not m.__file__.startswith(sys.prefix):
        sys.exit(f"{m.__name__} is imported from outside the venv")
PY
step cake --version
step cake plugins list | tee plugins.txt
grep -q '^cake-tactics .*[1-9][0-9]* tactics' plugins.txt
grep -q '^cake-kmeans ' plugins.txt
step cake examples
step cake check examples/
step cake explain CK302 | tee explain.md
grep -q '^## Why is this bad?' explain.md
step cake run examples/kmeans_assign_sm90.cake --task kmeans_assign --sim
step cake cost examples/gemm_sm90.cake --dims M=4096,N=4096,K=4096 --gpu h200
step cake lower examples/gemm_sm90.cake -o out.cu
test -s out.cu
rm -rf examples  # evolve finds the task and its kernel in the installed package
step cake evolve kmeans_assign
test -f cake-runs/runs.sqlite
step cake runs list
echo "== wheel smoke test passed"
