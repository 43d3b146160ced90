"""Shared helpers of the emulation tests (imported as `emulate_support`).

The CPU runtime (`cake_core/emulate/include/cake_emulate.h`) is not needed: the fixture
`fixtures/fake_tinygemm.cu` defines the emulation ABI itself in plain C++, and computes
tinygemm's result on the host, so everything on the Python side (build, marshalling, the
report, the runner and the command line) runs against it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from cake_core.emulate.build import host_compiler_present

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "fake_tinygemm.cu"
TINYGEMM = ROOT / "examples" / "tinygemm_sm90.cake"

MODES = {"correct": 0, "deadlock": 1, "wrong": 2, "not_ok": 3, "crash": 4, "hang": 5,
         "refused": 6, "wrong_when_eager": 7, "deadlock_when_eager": 8}


needs_cxx = pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")


def fixture_cu(mode: str = "correct", cake_file: str = "tinygemm_sm90.cake",
               line: int = 1) -> str:
    """The fixture with its behaviour and the location its findings name."""
    return (f"#define FIXTURE_MODE {MODES[mode]}\n"
            f'#define FIXTURE_CAKE_FILE "{cake_file}"\n'
            f"#define FIXTURE_LINE {line}\n" + FIXTURE.read_text(encoding="utf-8"))


@functools.cache
def tinygemm_meta() -> dict[str, Any]:
    """The launch metadata of the real lowering of tinygemm (what the fixture mimics)."""
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile

    lowered = lower_source(SourceFile.read(TINYGEMM, str(TINYGEMM)))
    assert lowered.ok and lowered.kernels
    return dict(lowered.kernels[0].meta)
