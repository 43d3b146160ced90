#!/usr/bin/env bash
# One command on a machine with an NVIDIA GPU: set up, then run every example kernel through
# the GPU runner on its task and print the table, then the headline comparisons: gemm_sm90
# (and variants) vs cuBLAS at 4096^3 and 8192^3, the k-means kernels vs the torch reference
# and flash-kmeans at B=32, N=65536, K=1024, D=128 (bench/gpu_check.py; docs/running.md).
#
#   bash scripts/gpu_check.sh [bench/gpu_check.py options, e.g. --rounds 5]
#
# Setup, bounded so the whole run stays within 10 minutes:
#   * a virtual environment (.venv-gpu, or $VENV) that also sees the packages of the Python
#     that made it (torch, numpy, ... of a GPU image), even when that Python is itself a venv;
#   * `pip install -e .`: from the registry when one answers, else from a wheelhouse
#     ($CAKE_WHEELHOUSE or ./.whl: tree-sitter and tree-sitter-python for this Python), else
#     with what is installed (the repo runs from its checkout either way);
#   * the CUDA toolkit: the newest one installed (/usr/local/cuda-*, CUDA_HOME, PATH, the
#     nvidia-cuda-nvcc wheel) whose version the driver supports goes first on PATH; the
#     script says which and why (cake_core/lower/toolkits.py);
#   * pycuda: `pip install pycuda` (built from source against the local CUDA where it has no
#     wheel, or taken from the wheelhouse); when that fails the runner uses torch instead;
#   * flash-kmeans (`pip install --no-deps flash-kmeans`, or from the wheelhouse), for the
#     k-means comparison; without it that row says `skipped` and why.
# Every step is time-boxed; the whole run stays under CAKE_GPU_CHECK_SECONDS (570 s).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
PY="${PYTHON:-python3}"
VENV="${VENV:-$ROOT/.venv-gpu}"
WHEELHOUSE="${CAKE_WHEELHOUSE:-$ROOT/.whl}"
TOTAL="${CAKE_GPU_CHECK_SECONDS:-570}"   # leave a margin under the 10 minutes
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=10 PYTHONUNBUFFERED=1
SECONDS=0

say() { printf 'gpu_check.sh: %s\n' "$*"; }

if ! command -v nvidia-smi >/dev/null 2>&1 && [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ]; then
  say "no NVIDIA GPU visible (no nvidia-smi, no /dev/nvidia*); this check needs one"
  exit 2
fi

# --- the environment ------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  if ! "$PY" -m venv --system-site-packages "$VENV" >/dev/null 2>&1; then
    say "cannot create a venv with $PY; using $PY as it is"
    VENV=""
  fi
fi
if [ -n "$VENV" ]; then
  # A venv made from a venv sees only the base interpreter's packages; point it at the
  # creating interpreter's site-packages too (where a GPU image keeps torch).
  parent_sites="$("$PY" -c 'import site, sysconfig; print("\n".join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()])))' 2>/dev/null)"
  own_site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  printf '%s\n' "$parent_sites" > "$own_site/_cake_parent_env.pth"
  PYBIN="$VENV/bin/python"
else
  PYBIN="$PY"
fi
pip_q() { timeout "${PIP_SECONDS:-150}" "$PYBIN" -m pip install -q --retries 0 "$@"; }

installed=no
if pip_q -e . >/dev/null 2>&1; then
  installed=yes
elif [ -d "$WHEELHOUSE" ] && pip_q --no-index --find-links "$WHEELHOUSE" --no-build-isolation -e . >/dev/null 2>&1; then
  installed="yes (wheelhouse $WHEELHOUSE)"
elif pip_q --no-deps --no-build-isolation -e . >/dev/null 2>&1; then
  installed="yes (without dependencies: no registry)"
fi
say "pip install -e .: $installed"

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
missing="$("$PYBIN" - <<'EOF'
import importlib.util
need = ["numpy", "click", "rich", "tree_sitter", "tree_sitter_python"]
print(" ".join(n for n in need if importlib.util.find_spec(n) is None))
EOF
)"
if [ -n "$missing" ]; then
  if [ -d "$WHEELHOUSE" ]; then
    # shellcheck disable=SC2086  # one word per missing package, on purpose
    pip_q --no-index --no-deps --find-links "$WHEELHOUSE" ${missing//_/-} >/dev/null 2>&1 || true
    missing="$("$PYBIN" -c 'import importlib.util as u; print(" ".join(n for n in ["numpy","click","rich","tree_sitter","tree_sitter_python"] if u.find_spec(n) is None))')"
  fi
fi
if [ -n "$missing" ]; then
  say "missing Python packages: $missing"
  say "no registry answered; put wheels for this Python in $WHEELHOUSE, e.g. on a machine with"
  say "  a registry: pip download --only-binary=:all: --python-version 3.12 -d .whl tree-sitter tree-sitter-python"
  exit 2
fi

# --- the CUDA toolkit: the newest the driver supports -------------------------------------
# nvcc builds each kernel's shared library; bench/gpu_check.py --choose-toolkit prints the
# chosen bin/ (empty: none found) and a sentence saying why
if choice="$(timeout 90 "$PYBIN" bench/gpu_check.py --choose-toolkit 2>/dev/null)"; then
  tk_bin="$(printf '%s\n' "$choice" | sed -n 1p)"
  say "toolkit: $(printf '%s\n' "$choice" | sed -n 2p)"
  if [ -n "$tk_bin" ]; then
    CUDA_HOME="$(dirname "$tk_bin")"
    export PATH="$tk_bin:$PATH" CUDA_HOME
  fi
else
  say "toolkit: could not choose one (keeping PATH as it is)"
fi

if ! nvcc_at="$("$PYBIN" -c 'import sys
from cake_core.lower.toolchain import NOT_FOUND, find_toolchain
tc = find_toolchain()
print(f"{tc.nvcc} ({tc.version})" if tc else NOT_FOUND)
sys.exit(0 if tc else 1)')"; then
  say "$nvcc_at"
  exit 2
fi
say "nvcc: $nvcc_at"

# --- pycuda, else torch -----------------------------------------------------------------------
backend_note=""
if "$PYBIN" -c 'import pycuda' >/dev/null 2>&1; then
  backend_note="pycuda (already installed)"
else
  left=$(( TOTAL - SECONDS - 420 ))   # keep at least 7 minutes for the runs
  if [ "$left" -gt 30 ]; then
    if PIP_SECONDS="$left" pip_q pycuda >/dev/null 2>&1 \
       || { [ -d "$WHEELHOUSE" ] && PIP_SECONDS="$left" pip_q --no-index --find-links "$WHEELHOUSE" --no-build-isolation pycuda >/dev/null 2>&1; }; then
      backend_note="pycuda (installed now)"
    fi
  fi
  if [ -z "$backend_note" ]; then
    if "$PYBIN" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
      backend_note="torch (pycuda could not be installed: no registry, or it failed to build)"
    else
      say "neither pycuda nor a CUDA-enabled torch is available: nothing can run kernels"
      exit 2
    fi
  fi
fi
say "backend: $backend_note"

# --- flash-kmeans, for the k-means comparison (optional) ------------------------------------
flash_mod='import importlib.util as u, sys; sys.exit(0 if u.find_spec("flash_kmeans") else 1)'
if [ -n "${CAKE_NO_FLASH:-}" ]; then
  flash_note="not wanted (CAKE_NO_FLASH)"
elif "$PYBIN" -c "$flash_mod" >/dev/null 2>&1; then
  flash_note="already installed"
else
  left=$(( TOTAL - SECONDS - 420 ))
  [ "$left" -gt 60 ] && left=60
  flash_note="not installed (no registry answered within ${left}s and no wheel in $WHEELHOUSE)"
  if [ "$left" -gt 10 ]; then
    # --no-deps: torch and triton come from the image; a resolver must not replace them
    if PIP_SECONDS="$left" pip_q --no-deps flash-kmeans >/dev/null 2>&1 \
       || { [ -d "$WHEELHOUSE" ] && PIP_SECONDS="$left" pip_q --no-index --no-deps \
              --find-links "$WHEELHOUSE" flash-kmeans >/dev/null 2>&1; }; then
      flash_note="installed now"
    fi
  else
    flash_note="not installed (no time left for pip)"
  fi
fi
say "flash-kmeans: $flash_note"

# --- the check ------------------------------------------------------------------------------
budget=$(( TOTAL - SECONDS - 90 ))   # the last kernel started may still need a while
[ "$budget" -lt 60 ] && budget=60
say "setup took ${SECONDS}s; running the examples (budget ${budget}s)"
# --deadline: 20 s before the hard stop the step in flight is stopped and the tables and
# the JSON are written with what is done (the rest marked skipped); timeout is the backstop
left=$(( TOTAL - SECONDS ))
timeout --signal=INT "$left" "$PYBIN" bench/gpu_check.py --budget "$budget" \
  --deadline $(( left > 40 ? left - 20 : left / 2 )) "$@"
status=$?
[ "$status" -eq 124 ] && say "stopped at the time limit"
exit "$status"
