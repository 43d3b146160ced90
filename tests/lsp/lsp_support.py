"""Helpers for the end-to-end tests: `cake lsp` as a subprocess, driven by pytest-lsp's
client with the recorded capabilities of real editors (VS Code 1.65: pushed diagnostics, UTF-16
positions; Neovim 0.11: pulled diagnostics, UTF-8 positions).

Each client fixture is module-scoped (one server per test module); tests open documents
under names of their own, so they do not see each other's state.  Nothing waits on a
clock: pushed diagnostics are awaited by (uri, version), pulled ones requested.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
GEMM = (DATA / "gemm.cake").read_text()
SERVER = [sys.executable, "-m", "cake_lsp"]
HANG_GUARD_S = 30.0
"""Only a guard against a hung server; no test depends on how fast anything is."""


def server_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


class RecordingClient(LanguageClient):
    """pytest-lsp's client, also keeping every publishDiagnostics with its version."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.published: list[lsp.PublishDiagnosticsParams] = []
        self._arrived: asyncio.Event | None = None
        self.init_result: lsp.InitializeResult | None = None

    async def next_publish(self) -> None:
        self._arrived = asyncio.Event()
        await asyncio.wait_for(self._arrived.wait(), HANG_GUARD_S)


def _record(client: RecordingClient, params: lsp.PublishDiagnosticsParams) -> None:
    client.published.append(params)
    client.diagnostics[params.uri] = params.diagnostics
    if client._arrived is not None:
        client._arrived.set()


def make_client() -> RecordingClient:
    client = RecordingClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record
    register_lsp_features(client, features)
    return client


def editor_client(editor: str, *, env: dict[str, str] | None = None,
                  settings: dict[str, object] | None = None,
                  init_options: dict[str, object] | None = None) -> Any:
    """A module-scoped `client` fixture: `cake lsp` started with `env` added to its
    environment, initialised with `editor`'s recorded capabilities ("visual-studio-code",
    "neovim"), answering workspace/configuration with `settings` for "cake"."""

    @pytest_lsp.fixture(config=ClientServerConfig(
        server_command=SERVER, server_env=server_env(**(env or {})),
        client_factory=make_client), scope="module")
    async def client(lsp_client: RecordingClient):  # type: ignore[no-untyped-def]
        if settings is not None:
            lsp_client.set_configuration(settings, section="cake")
        lsp_client.init_result = await lsp_client.initialize_session(lsp.InitializeParams(
            capabilities=client_capabilities(editor), root_uri=ROOT.as_uri(),
            initialization_options=init_options))
        yield
        await lsp_client.shutdown_session()

    return client


async def published(client: RecordingClient, uri: str, version: int | None = None,
                    after: int = 0) -> list[lsp.Diagnostic]:
    """The diagnostics pushed for `uri` (at `version`, if given) among the publications
    numbered `after` and later, waiting for them if needed."""
    while True:
        for p in client.published[after:]:
            if p.uri == uri and version in (None, p.version):
                return list(p.diagnostics)
        await client.next_publish()


async def published_until(client: RecordingClient, uri: str,
                          want: Callable[[list[lsp.Diagnostic]], bool],
                          after: int = 0) -> list[lsp.Diagnostic]:
    """The first diagnostics pushed for `uri` (from publication `after` on) that `want`."""
    seen = after
    while True:
        for p in client.published[seen:]:
            if p.uri == uri and want(list(p.diagnostics)):
                return list(p.diagnostics)
        seen = len(client.published)
        await client.next_publish()


async def pulled(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    report = await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert isinstance(report, lsp.RelatedFullDocumentDiagnosticReport)
    return list(report.items)


_names = itertools.count()


def new_uri(stem: str = "doc") -> str:
    """A fresh document URI (documents need not exist on disk)."""
    return (DATA / f"{stem}-{next(_names)}.cake").as_uri()


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="cake", version=version,
                                           text=text)))


def change(client: LanguageClient, uri: str, version: int,
           edits: list[tuple[lsp.Range, str]]) -> None:
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[lsp.TextDocumentContentChangePartial(range=r, text=t)
                         for r, t in edits]))


def pos(text: str, needle: str, delta: int = 0, encoding: str = "utf-16") -> lsp.Position:
    """The protocol position of the first `needle` in `text`, plus `delta` characters."""
    index = text.index(needle) + delta
    line = text.count("\n", 0, index)
    prefix = text[text.rfind("\n", 0, index) + 1:index]
    col = len(prefix.encode()) if encoding == "utf-8" else len(prefix.encode("utf-16-le")) // 2
    return lsp.Position(line=line, character=col)

