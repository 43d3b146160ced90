"""Nothing in CAKE executes, compiles or imports text it was given.

A `.cake` file is read, never run, and that is a security property as much as a design
one: the language server checks whatever a user opens, and agents check model output.
Two layers of evidence:

1. A static scan of every module of the tools with Python's `ast`: no `eval`, `exec`,
   builtin `compile`, `__import__`, `runpy`, `pickle`/`marshal` loading, and no
   `importlib.import_module` on a computed name unless the name is built from a constant
   table in the code itself.  The rule is mechanical; the few computed imports that are
   safe for a reason a scan cannot see are whitelisted by exact location, with the reason.
2. A dynamic check: hostile `.cake` text goes through `check_text` and leaves no trace.
"""

from __future__ import annotations

import ast
import builtins
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cake_core.check import check_text

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("cake_core", "cake_lsp", "cake_agents", "cake_cli", "cake", "plugins")

FORBIDDEN_BUILTINS = frozenset({"eval", "exec", "compile", "__import__"})
FORBIDDEN_ATTRS = {
    "runpy": None,  # every function of runpy runs code
    "pickle": frozenset({"load", "loads", "Unpickler"}),
    "marshal": frozenset({"load", "loads"}),
}

#: Computed imports the scan cannot prove safe, by (file, enclosing function, argument),
#: each with the reason it cannot carry user text.  Entries that no longer match fail the
#: test, so the list cannot outlive the code it excuses.
WHITELIST: dict[tuple[str, str, str], str] = {
    ("cake_cli/main.py", "LazyCakeGroup.get_command", "mod_name"):
        "the module comes from LAZY_COMMANDS, a constant table, and only for a command "
        "name found in that table",
    ("cake_core/primitives/facets.py", "Lazy.resolve", "module"):
        "a Lazy facet reference is written by the Python code that declares a primitive "
        "(built-in or an installed plugin); .cake text cannot create one",
    ("cake_lsp/guard.py", "_load", "module"):
        "pass modules come from the server's own pass table; non-built-in ones must live "
        "under `tests.` (checked just above the call), and document text never reaches it",
}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    scope: str
    what: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.scope}: {self.what}({self.arg})"


def python_files() -> Iterator[Path]:
    for top in SCANNED:
        root = REPO / top
        if root.is_dir():
            yield from sorted(p for p in root.rglob("*.py") if ".venv" not in p.parts)


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def module_path(module: str) -> Path | None:
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def constant_str_tuple(tree: ast.Module, name: str) -> bool:
    """Whether the module binds `name` once, at top level, to a tuple of string literals."""
    values = []
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            values.append(stmt.value)
    if len(values) != 1 or not isinstance(values[0], ast.Tuple):
        return False
    return all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in values[0].elts)


class Scanner(ast.NodeVisitor):
    """Collects forbidden calls in one module, tracking the enclosing scope and loops."""

    def __init__(self, path: Path) -> None:
        self.rel = path.relative_to(REPO).as_posix()
        self.tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.scopes: list[str] = []
        self.loops: list[tuple[ast.expr, ast.expr]] = []  # (target, iter) of enclosing fors
        self.imports: dict[str, str] = {}  # local name -> "module.name" for from-imports
        self.findings: list[Finding] = []
        self.whitelisted: set[tuple[str, str, str]] = set()

    def run(self) -> Scanner:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
        self.visit(self.tree)
        return self

    @property
    def scope(self) -> str:
        return ".".join(self.scopes) or "<module>"

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scopes.append(node.name)
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.loops.append((node.target, node.iter))
        for stmt in (*node.body, *node.orelse):
            self.visit(stmt)
        self.loops.pop()

    def visit_comprehension_node(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp |
                                 ast.DictComp) -> None:
        for gen in node.generators:
            self.visit(gen.iter)
            self.loops.append((gen.target, gen.iter))
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.comprehension):
                self.visit(child)
        for gen in node.generators:
            self.visit(gen.target)
            for cond in gen.ifs:
                self.visit(cond)
        del self.loops[len(self.loops) - len(node.generators):]

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_comprehension_node

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted(node.func)
        if name is not None:
            self._check(node, name)
        self.generic_visit(node)

    def resolve(self, name: str) -> str:
        """`loads` -> `pickle.loads` after `from pickle import loads`; aliases likewise."""
        first, dot, rest = name.partition(".")
        origin = self.imports.get(first)
        return f"{origin}{dot}{rest}" if origin else name

    def _check(self, node: ast.Call, name: str) -> None:
        resolved = self.resolve(name)
        head, _, attr = resolved.rpartition(".")
        if name in FORBIDDEN_BUILTINS:
            self._flag(node, name)
        elif head in FORBIDDEN_ATTRS:
            allowed = FORBIDDEN_ATTRS[head]
            if allowed is None or attr in allowed:
                self._flag(node, resolved)
        elif resolved == "importlib.import_module":
            arg = node.args[0] if node.args else None
            if arg is None or self._constant_module(arg):
                return
            key = (self.rel, self.scope, ast.unparse(arg))
            if key in WHITELIST:
                self.whitelisted.add(key)
            else:
                self._flag(node, name)

    def _constant_module(self, arg: ast.expr) -> bool:
        """A literal, or an f-string whose holes are loop variables over constant tables."""
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return True
        if not isinstance(arg, ast.JoinedStr):
            return False
        holes = [v.value for v in arg.values if isinstance(v, ast.FormattedValue)]
        return all(isinstance(h, ast.Name) and self._over_constant_table(h.id) for h in holes)

    def _over_constant_table(self, var: str) -> bool:
        for target, it in reversed(self.loops):
            if isinstance(target, ast.Name) and target.id == var:
                return isinstance(it, ast.Name) and self._is_constant_table(it.id)
        return False

    def _is_constant_table(self, name: str) -> bool:
        if constant_str_tuple(self.tree, name):
            return True
        origin = self.imports.get(name)
        if origin is None:
            return False
        module, _, attr = origin.rpartition(".")
        path = module_path(module)
        return path is not None and constant_str_tuple(
            ast.parse(path.read_text(encoding="utf-8")), attr)

    def _flag(self, node: ast.Call, what: str) -> None:
        arg = ast.unparse(node.args[0]) if node.args else ""
        self.findings.append(Finding(self.rel, node.lineno, self.scope, what, arg))


@pytest.fixture(scope="module")
def scans() -> list[Scanner]:
    return [Scanner(p).run() for p in python_files()]


def test_scan_covers_the_packages(scans: list[Scanner]) -> None:
    scanned = {s.rel.split("/")[0] for s in scans}
    assert {"cake_core", "cake_lsp", "cake_cli"} <= scanned
    assert any(s.rel == "cake_core/check.py" for s in scans)


def test_no_code_execution_or_computed_imports(scans: list[Scanner]) -> None:
    findings = [f for s in scans for f in s.findings]
    assert not findings, "code that could run or import text:\n" + "\n".join(map(str, findings))


def test_whitelist_entries_are_all_in_use(scans: list[Scanner]) -> None:
    used = set().union(*(s.whitelisted for s in scans))
    stale = set(WHITELIST) - used
    assert not stale, f"whitelisted computed imports that no longer exist: {sorted(stale)}"


SCANNER_CASES = [
    ("eval(text)", 1),
    ("exec(compile(src, 'x', 'exec'))", 2),
    ("__import__(name)", 1),
    ("import runpy\nrunpy.run_path(p)", 1),
    ("import pickle\npickle.loads(blob)", 1),
    ("from pickle import loads\nloads(blob)", 1),
    ("import pickle as pk\npk.loads(blob)", 1),
    ("from pickle import dumps\ndumps(obj)", 0),
    ("from importlib import import_module\nimport_module(name)", 1),
    ("import marshal\nmarshal.loads(blob)", 1),
    ("import importlib\nimportlib.import_module(user_text)", 1),
    ("import importlib\nimportlib.import_module('cake_core.check')", 0),
    ("import importlib\nfor m in names():\n    importlib.import_module(f'pkg.{m}')", 1),
    ("import importlib\nMODS = ('a', 'b')\nfor m in MODS:\n    importlib.import_module(f'p.{m}')",
     0),
    ("import importlib\nMODS = ('a', x)\nfor m in MODS:\n    importlib.import_module(f'p.{m}')", 1),
    ("import importlib\nMODS = ('a',)\n[importlib.import_module(f'p.{m}') for m in MODS]", 0),
    ("import re\nre.compile(pattern)", 0),
    ("ctx.eval(expr)", 0),
]


@pytest.mark.parametrize(("code", "expected"), SCANNER_CASES)
def test_scanner_rule(tmp_path: Path, code: str, expected: int,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule itself: what it flags and what it lets through."""
    path = tmp_path / "mod.py"
    path.write_text(code + "\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert len(Scanner(path).run().findings) == expected


# --- hostile input ----------------------------------------------------------------------------
HOSTILE = '''\
__import__("os").system("touch {marker}")
exec("open('{marker}', 'w').close()")
BM = eval("__import__('os').system('touch {marker}')")

@kernel(arch="sm_80", grid=(1,), warps=4)
def k(X: Tensor[f32, (64, 64)]):
    __import__("os").system("touch {marker}")
    exec("import os; os.system('touch {marker}')")
    x = compile("1", "f", "eval")
    store(X.tile((64, 64), (0, 0)), load(X.tile((64, 64), (0, 0))))
'''


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every exec/eval/compile/shell call made while the test body runs."""
    calls: list[str] = []

    def spy(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*args: object, **kwargs: object) -> object:
            calls.append(f"{name}: {str(args[0])[:200] if args else ''}")
            return real(*args, **kwargs)
        return wrapper

    for name in ("exec", "eval", "compile"):
        monkeypatch.setattr(builtins, name, spy(name, getattr(builtins, name)))
    for mod, name in ((os, "system"), (os, "popen"), (subprocess, "Popen")):
        monkeypatch.setattr(mod, name, spy(f"{mod.__name__}.{name}", getattr(mod, name)))
    return calls


def test_hostile_text_is_reported_not_run(tmp_path: Path, tripwires: list[str]) -> None:
    marker = tmp_path / "pwned"
    text = HOSTILE.format(marker=marker)
    check_text(text, "warm-up.cake")  # any lazy import of the compiler happens here
    tripwires.clear()

    result = check_text(text, "hostile.cake")

    assert not marker.exists()
    assert not [c for c in tripwires if "pwned" in c or "touch" in c], tripwires
    by_line = {d.span.start.line: d for d in result.diagnostics}
    # every line that tries to run something is reported, at top level and in the kernel
    assert set(by_line) == {0, 1, 2, 6, 7, 8}, [(d.code, d.message) for d in result.diagnostics]
    assert by_line[0].code == by_line[1].code == "CK005"  # statements at top level
    for line in (2, 7, 8):  # eval/exec/compile: not primitives, and the note says why
        assert by_line[line].code == "CK102"
        assert any("not executed as Python" in n for n in by_line[line].notes)
    assert all(d.code != "CK901" for d in result.diagnostics)


@pytest.mark.parametrize("line", [
    'import os\nos.system("touch {marker}")',
    'from os import system\nsystem("touch {marker}")',
    'lambda: __import__("os").system("touch {marker}")',
    '(lambda: 0).__globals__["__builtins__"]["exec"]("open(\'{marker}\', \'w\')")',
])
def test_other_escape_attempts(tmp_path: Path, line: str, tripwires: list[str]) -> None:
    marker = tmp_path / "pwned"
    text = line.format(marker=marker) + "\n"
    check_text(text, "warm-up.cake")
    tripwires.clear()
    result = check_text(text, "escape.cake")
    assert result.errors, "an escape attempt must not check clean"
    assert not marker.exists()
    assert not [c for c in tripwires if "pwned" in c or "touch" in c], tripwires
