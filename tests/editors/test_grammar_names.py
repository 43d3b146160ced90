"""The VS Code grammar highlights every name the compiler knows.

The name lists in `editors/vscode/syntaxes/cake.tmLanguage.json` are generated from the
primitive registry and the built-in names (`editors/vscode/scripts/gen_grammar.py`); a
primitive, dtype, layout or index space added to the compiler without regenerating the
grammar fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from cake_core.elab.scope import FRAG_LAYOUT_NAMES, INDEX_SPACES, SMEM_LAYOUT_NAMES
from cake_core.ir.types import DTYPE_NAMES
from cake_core.primitives.registry import builtin_registry

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "editors" / "vscode" / "scripts" / "gen_grammar.py"
GRAMMAR = json.loads((REPO / "editors" / "vscode" / "syntaxes" / "cake.tmLanguage.json")
                     .read_text(encoding="utf-8"))
REPOSITORY = GRAMMAR["repository"]


def _scope_at(entry: dict, text: str, word: str) -> str | None:
    """The scope a repository entry gives `word` inside `text` (None if it does not match)."""
    start = text.index(word)
    rules = entry.get("patterns", [entry])
    for rule in rules:
        for m in re.finditer(rule["match"], text):
            if "name" in rule and m.start() == start and m.end() == start + len(word):
                return rule["name"]
            for group, capture in rule.get("captures", {}).items():
                if m.start(int(group)) == start and m.end(int(group)) == start + len(word):
                    return capture["name"]
    return None


def test_the_generated_entries_are_up_to_date() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_every_primitive_and_method_is_highlighted() -> None:
    registry = builtin_registry()
    for prim in registry.all():
        if prim.receiver is None:
            assert _scope_at(REPOSITORY["primitives"], f"x = {prim.name}(a)", prim.name) == \
                "support.function.primitive.cake", prim.name
        else:
            assert _scope_at(REPOSITORY["methods"], f"x = v.{prim.name}(a)", prim.name) == \
                "support.function.method.cake", prim.name


def test_every_dtype_layout_and_index_space_is_highlighted() -> None:
    for name in DTYPE_NAMES:
        assert _scope_at(REPOSITORY["dtypes"], f"f({name}, s)", name) == \
            "support.type.dtype.cake", name
    for name in SMEM_LAYOUT_NAMES:
        assert _scope_at(REPOSITORY["layouts"], f"layout={name}", name) == \
            "support.constant.layout.smem.cake", name
    for name in FRAG_LAYOUT_NAMES:
        assert _scope_at(REPOSITORY["layouts"], f"layout={name})", name) == \
            "support.constant.layout.fragment.cake", name
    for space, members in INDEX_SPACES.items():
        for member in members:
            text = f"t = ({space}.{member}, k)"
            assert _scope_at(REPOSITORY["index-spaces"], text, space) == \
                "variable.language.index-space.cake", space
            assert _scope_at(REPOSITORY["index-spaces"], text, member) == \
                "variable.language.index-space.member.cake", f"{space}.{member}"


def test_a_name_is_not_a_primitive_after_a_dot_or_without_a_call() -> None:
    assert _scope_at(REPOSITORY["primitives"], "x.load(a)", "load") is None
    assert _scope_at(REPOSITORY["primitives"], "load = 3", "load") is None
