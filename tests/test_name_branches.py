"""Analyses dispatch on traits and facets, never on primitive names.

An analysis that asks `op.prim.name == "wgmma"` breaks for the next MMA primitive and
for every plugin primitive with the same properties; it should ask
`Trait.MMA in op.prim.traits`, read the op's `EffectSpec`, or call a facet.  This test
walks the analyses' syntax trees and lists every comparison or lookup keyed by a
primitive's name.  A branch that must stay carries a `# name-branch: <why>` comment on
its line; the others count against BUDGET, which only ever goes down.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "cake_core"
#: Where the built-in primitives are declared with their facets: names are their business.
OWNERS = ("ops",)
#: Unjustified name branches left in the analyses (lower it when you remove some).
BUDGET = 0
_NAME_ATTRS = {"name", "key", "family"}
_OP_VARS = {"op", "o"}


def _is_prim_name(node: ast.AST, aliases: frozenset[str] = frozenset()) -> bool:
    """`x.prim.name` / `.key` / `.family`, `op.name` (an Op's name is its primitive's), or
    a local variable assigned one of those (`name = op.prim.name`)."""
    if isinstance(node, ast.Name):
        return node.id in aliases
    if not isinstance(node, ast.Attribute) or node.attr not in _NAME_ATTRS:
        return False
    inner = node.value
    if isinstance(inner, ast.Attribute) and inner.attr == "prim":
        return True
    return node.attr == "name" and isinstance(inner, ast.Name) and inner.id in _OP_VARS


def _is_name_data(node: ast.AST) -> bool:
    """A string, a collection of strings, or an UPPER_CASE table of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(_is_name_data(e) for e in node.elts)
    if isinstance(node, ast.Name):
        return node.id.lstrip("_").isupper()
    if isinstance(node, ast.Subscript):
        return _is_name_data(node.value)
    return False


def _branches_on_name(node: ast.AST, aliases: frozenset[str]) -> bool:
    """A comparison of a primitive's name with name data, or a lookup keyed by it."""
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        return any(_is_prim_name(s, aliases) for s in sides) and \
            any(_is_name_data(s) for s in sides)
    if isinstance(node, ast.Subscript):
        return _is_prim_name(node.slice, aliases)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and bool(node.args)
            and _is_prim_name(node.args[0], aliases))


def name_branches(path: Path) -> list[int]:
    """Lines of `path` that branch on, or look up by, a primitive's name."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    hits: set[int] = set()
    tree = ast.parse(text)
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *scopes]:
        aliases = frozenset(
            a.targets[0].id for a in ast.walk(scope)
            if isinstance(a, ast.Assign) and len(a.targets) == 1
            and isinstance(a.targets[0], ast.Name) and _is_prim_name(a.value))
        for node in ast.walk(scope):
            if _branches_on_name(node, aliases):
                hits.add(node.lineno)
    return sorted(n for n in hits if "# name-branch:" not in lines[n - 1])


def _analysis_files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py")
                  if not any(p.relative_to(ROOT).as_posix().startswith(o) for o in OWNERS))


def test_name_branches_stay_within_budget() -> None:
    found = [f"{p.relative_to(ROOT.parent)}:{n}" for p in _analysis_files()
             for n in name_branches(p)]
    assert len(found) <= BUDGET, "new name branches:\n" + "\n".join(found)


def test_the_detector_sees_each_form(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text(
        'if op.prim.name == "wgmma": pass\n'
        'if op.name in ("tma_load", "tma_store"): pass\n'
        'x = TABLE[op.prim.name]\n'
        'y = TABLE.get(op.prim.key)\n'
        'if n.prim.name in SINGLE_THREAD_OPS: pass\n'
        'if op.prim.family != "math": pass\n'
        'if op.prim.name == "pipeline": pass  # name-branch: the builder echo\n'
        'if role.name == "load": pass\n'
        'if Trait.MMA in op.prim.traits: pass\n'
        'def f(op):\n'
        '    name = op.prim.name\n'
        '    if name == "ldmatrix": pass\n', encoding="utf-8")
    assert name_branches(src) == [1, 2, 3, 4, 5, 6, 12]
