"""Fixtures of the emulation tests: an isolated cache and a stand-in runtime folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from cake_core.emulate import build as emu_build  # noqa: E402


@pytest.fixture
def stub_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An include folder holding a placeholder cake_emulate.h, and a private cache: the
    runner refuses to emulate without the runtime header, which the fixture never uses."""
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / emu_build.RUNTIME_HEADER).write_text("// placeholder for the tests\n")
    monkeypatch.setattr(emu_build, "INCLUDE_DIR", inc)
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path / "cache"))
    return inc
