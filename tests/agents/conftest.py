"""Shared pieces of the agent tests: one language server for the session, small runs.

Every run here is small (a few evaluations of the bf16 GEMM task, whose simulation takes
a fraction of a second) and evaluates in-process unless a test is about the process pool.
No test reaches a network: models are scripted or litellm's `mock_response`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

pytest.importorskip("langgraph")
pytest.importorskip("langgraph.checkpoint.sqlite")


@pytest.fixture(scope="session")
def lsp() -> Iterator[Any]:
    """`cake lsp` as a subprocess, shared by the tests (each opens documents of its own)."""
    from cake_agents.lsp_client import CakeLspClient

    client = CakeLspClient(root=ROOT)
    client.start()
    yield client
    client.stop()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"
