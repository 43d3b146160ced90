"""The ways to start `cake`: the console script, `python -m cake`, `python -m cake_cli`.

Editors start the language server as `<python> -m cake lsp`, so the module entry points
must keep working wherever the console script is not on PATH.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import cake_cli.main

REPO = Path(__file__).resolve().parent.parent


def test_the_console_script_is_the_cli_package() -> None:
    (script,) = entry_points(group="console_scripts", name="cake")
    assert script.value == "cake_cli.main:main"
    assert script.load() is cake_cli.main.main


@pytest.mark.parametrize("module", ["cake", "cake_cli"])
def test_python_dash_m_runs_the_command(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                         text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Usage: cake ")
    for command in ("check", "cost", "evolve", "lsp", "run"):
        assert f"\n  {command} " in out.stdout


def test_python_dash_m_passes_arguments_and_exit_status() -> None:
    out = subprocess.run([sys.executable, "-m", "cake", "explain", "CK999999"],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 2 and "unknown code 'CK999999'" in out.stderr


def test_help_loads_no_library() -> None:
    """`cake --help` imports every command module for its help line; none of them may
    import the compiler, the server or the agents at load time."""
    code = ("import sys\n"
            "from cake_cli.main import main\n"
            "try:\n"
            "    main(['--help'])\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('cake')}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "['cake_cli']"
