"""Refresh the generated name lists of the CAKE TextMate grammar from the compiler.

The grammar (`syntaxes/cake.tmLanguage.json`) is written by hand except for the
repository entries named in `GENERATED`: the primitives, methods, builder forms, layouts,
dtypes, index spaces and constants.  Those come from the primitive registry and the table
of built-in names (`cake_core/elab/scope.py`), so a primitive added to the compiler is
highlighted once this script runs:

    python editors/vscode/scripts/gen_grammar.py          # rewrite the generated entries
    python editors/vscode/scripts/gen_grammar.py --check  # exit 1 if they are stale

`tests/editors/test_grammar_names.py` runs the check, so a stale grammar fails the suite.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GRAMMAR = HERE.parent / "syntaxes" / "cake.tmLanguage.json"
ROOT = HERE.parents[2]

#: Builder forms that get a scope of their own instead of `support.function.builtin`.
LAYOUT_FUNCTIONS = ("swizzle", "padded")
SPECIAL_FORMS = ("role", "Tensor", *LAYOUT_FUNCTIONS)

NOT_AFTER_DOT = r"(?<![.\w])"


def _alternation(names: list[str]) -> str:
    """`(?:a|b|c)`, longest first so that no name shadows a longer one."""
    return "(?:" + "|".join(sorted(set(names), key=lambda n: (-len(n), n))) + ")"


def generated_entries() -> dict[str, Any]:
    """The generated repository entries, computed from the compiler's tables."""
    if str(ROOT) not in sys.path:  # running from a checkout that is not installed
        sys.path.insert(0, str(ROOT))
    from cake_core.elab.scope import (
        BUILDER_FUNCTIONS,
        FLOAT_CONSTANTS,
        FRAG_LAYOUT_NAMES,
        INDEX_SPACES,
        SMEM_LAYOUT_NAMES,
    )
    from cake_core.ir.types import DTYPE_NAMES
    from cake_core.primitives.registry import builtin_registry

    registry = builtin_registry()
    functions = sorted(p.name for p in registry.all() if p.receiver is None)
    methods = sorted({p.name for p in registry.all() if p.receiver is not None})
    forms = sorted(n for n in BUILDER_FUNCTIONS if n not in SPECIAL_FORMS)
    missing = [n for n in SPECIAL_FORMS if n not in BUILDER_FUNCTIONS]
    if missing:
        raise SystemExit(f"builder forms the grammar expects are gone: {', '.join(missing)}")

    index_patterns: list[dict[str, Any]] = []
    for space, attrs in INDEX_SPACES.items():
        index_patterns.append({
            "match": rf"{NOT_AFTER_DOT}\b({space})\s*(\.)\s*({_alternation(list(attrs))})\b",
            "captures": {
                "1": {"name": "variable.language.index-space.cake"},
                "2": {"name": "punctuation.accessor.cake"},
                "3": {"name": "variable.language.index-space.member.cake"},
            },
        })
    index_patterns.append({
        "match": rf"{NOT_AFTER_DOT}\b{_alternation(list(INDEX_SPACES))}\b",
        "name": "variable.language.index-space.cake",
    })

    return {
        "primitives": {
            "comment": "Generated from the primitive registry by scripts/gen_grammar.py.",
            "match": rf"{NOT_AFTER_DOT}\b{_alternation(functions)}\b(?=\s*\()",
            "name": "support.function.primitive.cake",
        },
        "methods": {
            "comment": "Generated: methods of tensors, smem views, pipelines and mbarriers.",
            "match": rf"(\.)\s*({_alternation(methods)})\b(?=\s*\()",
            "captures": {
                "1": {"name": "punctuation.accessor.cake"},
                "2": {"name": "support.function.method.cake"},
            },
        },
        "builder-forms": {
            "comment": "Generated: functions the IR builder evaluates (scope.BUILDER_FUNCTIONS).",
            "match": rf"{NOT_AFTER_DOT}\b{_alternation(forms)}\b(?=\s*\()",
            "name": "support.function.builtin.cake",
        },
        "layouts": {
            "comment": "Generated: shared-memory layouts, layout functions, fragment layouts.",
            "patterns": [
                {"match": rf"{NOT_AFTER_DOT}\b{_alternation(list(LAYOUT_FUNCTIONS))}\b"
                          r"(?=\s*\()",
                 "name": "support.function.layout.cake"},
                {"match": rf"{NOT_AFTER_DOT}\b{_alternation(list(SMEM_LAYOUT_NAMES))}\b",
                 "name": "support.constant.layout.smem.cake"},
                {"match": rf"{NOT_AFTER_DOT}\b{_alternation(list(FRAG_LAYOUT_NAMES))}\b",
                 "name": "support.constant.layout.fragment.cake"},
            ],
        },
        "dtypes": {
            "comment": "Generated: element types (types.DTYPE_NAMES).",
            "match": rf"{NOT_AFTER_DOT}\b{_alternation(list(DTYPE_NAMES))}\b",
            "name": "support.type.dtype.cake",
        },
        "index-spaces": {
            "comment": "Generated: index spaces and their members (scope.INDEX_SPACES).",
            "patterns": index_patterns,
        },
        "builtin-constants": {
            "comment": "Generated: float constants (scope.FLOAT_CONSTANTS).",
            "match": rf"{NOT_AFTER_DOT}\b{_alternation(list(FLOAT_CONSTANTS))}\b",
            "name": "constant.language.cake",
        },
    }


GENERATED = ("primitives", "methods", "builder-forms", "layouts", "dtypes", "index-spaces",
             "builtin-constants")


def render(grammar: dict[str, Any]) -> str:
    return json.dumps(grammar, indent=2, ensure_ascii=False) + "\n"


def refreshed(text: str) -> str:
    """The grammar text with its generated entries recomputed, the rest kept as it is."""
    grammar = json.loads(text)
    entries = generated_entries()
    assert set(entries) == set(GENERATED)
    grammar["repository"].update(entries)
    return render(grammar)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the grammar's generated entries are stale")
    args = parser.parse_args(argv)
    current = GRAMMAR.read_text(encoding="utf-8")
    fresh = refreshed(current)
    if args.check:
        if fresh != current:
            print(f"{GRAMMAR} is stale: run python {Path(__file__).as_posix()}",
                  file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        GRAMMAR.write_text(fresh, encoding="utf-8")
        print(f"updated {GRAMMAR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
