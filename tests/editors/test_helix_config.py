"""The Helix snippet (`editors/helix/languages.toml`) parses, declares the language as the
other editors do, and holds only settings the server accepts."""

from __future__ import annotations

import tomllib
from pathlib import Path

from cake_lsp.settings import Settings, parse_settings

REPO = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((REPO / "editors" / "helix" / "languages.toml").read_text(encoding="utf-8"))


def test_the_language_uses_the_python_grammar_and_the_cake_server() -> None:
    [language] = CONFIG["language"]
    assert language["name"] == "cake"
    assert language["file-types"] == ["cake"]
    assert language["scope"] == "source.cake"
    assert language["grammar"] == "python"
    assert language["comment-token"] == "#"
    assert language["language-servers"] == ["cake"]


def test_the_server_is_cake_lsp() -> None:
    server = CONFIG["language-server"]["cake"]
    assert [server["command"], *server["args"]] == ["cake", "lsp"]


def test_the_server_accepts_the_settings_as_initialization_options() -> None:
    # Helix sends `config` whole as initializationOptions and answers
    # workspace/configuration for section "cake" with config["cake"].
    config = CONFIG["language-server"]["cake"]["config"]
    for raw in (config, config["cake"]):
        settings, errors = parse_settings(raw, Settings())
        assert errors == []
        assert settings == Settings()


def test_the_query_files_inherit_pythons() -> None:
    queries = sorted((REPO / "editors" / "helix" / "runtime" / "queries" / "cake").glob("*.scm"))
    assert {q.stem for q in queries} >= {"highlights", "indents", "textobjects"}
    for q in queries:
        assert q.read_text(encoding="utf-8").splitlines()[0] == "; inherits: python", q.name
