"""Initialization, settings and shutdown.

Settings come first from `initializationOptions`, then from `workspace/configuration`
(section "cake") once the client is initialized, and again whenever the client says
they changed.  Clients that cannot answer configuration requests send the new values in
`didChangeConfiguration` itself.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_lsp.convert import path_of_uri
from cake_lsp.settings import SECTION

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer


def initialize(ls: CakeLanguageServer, params: lsp.InitializeParams) -> None:
    ls._loop = asyncio.get_running_loop()
    ls.load_plugins(_root(params))
    ls.apply_settings(params.initialization_options, "initializationOptions")


def _root(params: lsp.InitializeParams) -> Path | None:
    """The first workspace folder (its pyproject.toml holds the project's `[tool.cake]`)."""
    uri = params.workspace_folders[0].uri if params.workspace_folders else params.root_uri
    if uri is None and params.root_path:
        return Path(params.root_path)
    if uri is None or not uri.startswith("file:"):
        return None
    return Path(path_of_uri(uri))


async def initialized(ls: CakeLanguageServer, params: lsp.InitializedParams) -> None:
    await _fetch(ls)


async def did_change_configuration(ls: CakeLanguageServer,
                                   params: lsp.DidChangeConfigurationParams) -> None:
    if _can_fetch(ls):
        await _fetch(ls)
    elif isinstance(params.settings, dict) and SECTION in params.settings:
        ls.apply_settings(params.settings[SECTION], "settings")


def shutdown(ls: CakeLanguageServer, params: None) -> None:
    for doc in ls.documents:
        if doc.task is not None:
            doc.task.cancel()
    ls.checker.shutdown()


def _can_fetch(ls: CakeLanguageServer) -> bool:
    ws = ls.client_capabilities.workspace
    return ws is not None and bool(ws.configuration)


async def _fetch(ls: CakeLanguageServer) -> None:
    if not _can_fetch(ls):
        return
    try:
        values = await ls.workspace_configuration_async(lsp.ConfigurationParams(
            items=[lsp.ConfigurationItem(section=SECTION)]))
    except Exception as exc:  # a client that fails the request keeps the old settings
        ls.window_log_message(lsp.LogMessageParams(
            type=lsp.MessageType.Warning, message=f"CAKE: could not read settings: {exc}"))
        return
    if values:
        ls.apply_settings(values[0], "settings")


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.INITIALIZE)(initialize)
    server.feature(lsp.INITIALIZED)(initialized)
    server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(lsp.SHUTDOWN)(shutdown)
