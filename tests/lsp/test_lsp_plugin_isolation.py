"""Faulty third-party plugins, installed for real (entry points in a private folder), in
the language server: a rule that raises, one that loops forever and one that allocates
without bound are each announced once per session (one window message), disabled, and
named by a CK902 on the files they would have checked; the healthy plugin's findings and
the server go on.  Driven by a real LSP client (pytest-lsp, VS Code's capabilities)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from lsp_support import GEMM, ROOT, RecordingClient, editor_client, new_uri, open_doc, published
from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from faulty_plugins import FAULTY, MEMORY_MB, write_site

from cake_core.plugins.sandbox import MEMORY_ENV

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow,
              pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

SITE = write_site(Path(tempfile.mkdtemp(prefix="cake-lsp-plugins-")) / "site")

client = editor_client("visual-studio-code", env={
    "PYTHONPATH": os.pathsep.join([str(SITE), str(ROOT)]), MEMORY_ENV: MEMORY_MB})


def _failed(diags: list[lsp.Diagnostic]) -> dict[str, str]:
    return {d.message.split("`")[1].partition(":")[0]: d.message for d in diags
            if d.code == "CK902"}


async def test_faulty_plugins_are_disabled_once_and_the_server_goes_on(
        client: RecordingClient) -> None:
    first = new_uri()
    open_doc(client, first, GEMM)
    diags = await published(client, first, 1)
    failed = _failed(diags)
    assert set(failed) == set(FAULTY), [d.message for d in diags]
    assert "raised RuntimeError: plugin bug" in failed["faulty-raise"]
    assert "ran longer than 1 s" in failed["faulty-loop"]
    assert f"exceeded its memory limit ({MEMORY_MB} MiB)" in failed["faulty-alloc"]
    assert any(d.code == "GP101" and d.source == "good-plugin" for d in diags)

    second = new_uri()
    open_doc(client, second, GEMM)
    again = await published(client, second, 1)
    assert set(_failed(again)) == set(FAULTY), "still named on every file it would check"
    assert any(d.code == "GP101" for d in again), "the healthy plugin still runs"
    # announced once per session, however many files
    shown = [m.message for m in client.messages]
    for name in FAULTY:
        assert sum(f"{name}:" in m for m in shown) == 1, shown
    assert not any("Traceback" in m for m in shown)
