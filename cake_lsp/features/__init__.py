"""One module per LSP feature; each exposes `register(server)`.

The list is explicit: a feature is registered because it is named here, not because its
module happened to be imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cake_lsp.features import (
    code_actions,
    commands,
    completion,
    diagnostics,
    hover,
    inlay_hints,
    lifecycle,
    navigation,
    semantic_tokens,
    signature_help,
    symbols,
    sync,
)

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer

FEATURES = (lifecycle, sync, diagnostics, hover, completion, signature_help, navigation,
            symbols, inlay_hints, code_actions, semantic_tokens, commands)


def register_all(server: CakeLanguageServer) -> None:
    for feature in FEATURES:
        feature.register(server)
