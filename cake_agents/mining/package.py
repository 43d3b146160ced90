"""The plugin package promoted items are written into: a new one, or an existing plugin.

Layout (a new package is laid out as `cake plugins new` lays one out, without the demo
rule and tactic):

```
<root>/pyproject.toml              entry point  <name> = "<pkg>:plugin"
<root>/promoted.json               the manifest: every promoted item and its evidence
<root>/<pkg>/__init__.py           plugin = extend(Plugin(...))
<root>/<pkg>/promoted/__init__.py  RULES, TACTICS, PRIMITIVES, CALIBRATIONS, extend()
<root>/<pkg>/promoted/<item>.py    one module per item (the part a person edits)
<root>/docs/<CODE>.md              one page per promoted rule
<root>/tests/examples/<item>/      fail_N.cake (the failing candidates), clean_N.cake
<root>/tests/test_promoted.py      regression tests of every item
```

An existing plugin (any package with a `cake.plugins` entry point) gets the same
`promoted/` subpackage and manifest, and two lines appended to its `__init__.py` that
wrap its entry-point object with `extend(...)`; nothing else of it is touched.
`promoted/__init__.py` and `tests/test_promoted.py` are regenerated from the manifest on
every promotion; the item modules are written once and then belong to whoever edits them.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cake_core.plugins.api import PLUGIN_API_VERSION
from cake_core.plugins.scaffold import PYPROJECT, _code_prefix

MANIFEST = "promoted.json"
MARKER = "cake promote"
DEFAULT_PLUGIN = "cake-promoted"
_PLUGIN_NAME = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]")
ATTRS = {"rule": "RULE", "tactic": "TACTIC", "primitive": "PRIMITIVE",
         "calibration": "CALIBRATION"}
TUPLES = {"rule": "RULES", "tactic": "TACTICS", "primitive": "PRIMITIVES",
          "calibration": "CALIBRATIONS"}


class PackageError(ValueError):
    """The folder is neither empty nor a CAKE plugin package."""


@dataclass
class ItemEntry:
    """One promoted item as the manifest records it."""

    kind: str
    name: str
    module: str
    code: str
    digest: str
    signature: str
    created: str
    examples: list[str] = field(default_factory=list)
    clean: list[str] = field(default_factory=list)

    @property
    def attr(self) -> str:
        return ATTRS[self.kind]


@dataclass
class PluginPackage:
    root: Path
    name: str
    pkg: str
    attr: str
    prefix: str
    items: list[ItemEntry] = field(default_factory=list)
    created: bool = False
    _pending: bool = field(default=False, repr=False, compare=False)

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def open_or_create(cls, root: Path, *, write: bool = True) -> PluginPackage:
        """The package at `root`, made when the folder is missing or empty.  With
        `write=False` nothing is written yet (no folder made, no hook added) until
        `prepare()`: a promotion that is refused half-way must leave no trace."""
        root = Path(root)
        if (root / "pyproject.toml").is_file():
            return cls._open(root, write=write)
        if root.exists() and any(root.iterdir()):
            raise PackageError(f"{root} is neither empty nor a plugin package (no "
                               "pyproject.toml)")
        name = root.name if _PLUGIN_NAME.fullmatch(root.name) else DEFAULT_PLUGIN
        pkg = name.replace("-", "_")
        out = cls(root, name, pkg, "plugin", _code_prefix(name), created=True)
        if write:
            out._create()
        else:
            out._pending = True
        return out

    def prepare(self) -> None:
        """Write what `open_or_create(write=False)` put off (the new package's files, or
        the hook into an existing one)."""
        if not self._pending:
            return
        self._pending = False
        if self.created:
            self._create()
        else:
            self._hook_existing()

    @classmethod
    def _open(cls, root: Path, *, write: bool = True) -> PluginPackage:
        try:
            data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise PackageError(f"cannot read {root / 'pyproject.toml'}: {exc}") from exc
        eps = data.get("project", {}).get("entry-points", {}).get("cake.plugins", {})
        if not eps:
            raise PackageError(f"{root} has no [project.entry-points.\"cake.plugins\"]: "
                               "not a CAKE plugin package")
        ref = str(next(iter(eps.values())))
        module, _, attr = ref.partition(":")
        pkg = module.split(".")[0]
        if not (root / pkg / "__init__.py").is_file() or not attr.isidentifier():
            raise PackageError(f"{root}: the entry point {ref!r} does not name "
                               f"`{pkg}/__init__.py:<object>`")
        name = str(data.get("project", {}).get("name") or next(iter(eps)))
        manifest = root / MANIFEST
        prefix = _code_prefix(name)
        items: list[ItemEntry] = []
        if manifest.is_file():
            m = json.loads(manifest.read_text(encoding="utf-8"))
            prefix = m.get("prefix", prefix)
            items = [ItemEntry(**i) for i in m.get("items", [])]
        out = cls(root, name, pkg, attr, prefix, items)
        if write:
            out._hook_existing()
        else:
            out._pending = True
        return out

    # -- writing ---------------------------------------------------------------------------------
    def _write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def _create(self) -> None:
        text = PYPROJECT.format(name=self.name, pkg=self.pkg)
        self._write("pyproject.toml", _with_promoted_package(
            text.replace("A CAKE plugin", "CAKE items promoted from recurring failures"),
            self.pkg))
        self._write("README.md", README.format(name=self.name))
        self._write(f"{self.pkg}/__init__.py",
                    INIT.format(name=self.name, api=PLUGIN_API_VERSION, pkg=self.pkg))
        self.regenerate()

    def _hook_existing(self) -> None:
        init = self.root / self.pkg / "__init__.py"
        text = init.read_text(encoding="utf-8")
        if MARKER in text:
            return
        if not (self.root / self.pkg / "promoted" / "__init__.py").is_file():
            self.regenerate()
        hook = HOOK.format(pkg=self.pkg, attr=self.attr)
        init.write_text(text.rstrip("\n") + "\n" + hook, encoding="utf-8")
        pyproject = self.root / "pyproject.toml"
        old = pyproject.read_text(encoding="utf-8")
        new = _with_promoted_package(old, self.pkg)
        if new != old:
            pyproject.write_text(new, encoding="utf-8")

    def used_codes(self) -> set[str]:
        used = {i.code for i in self.items if i.code}
        docs = self.root / "docs"
        if docs.is_dir():
            used |= {p.stem for p in docs.glob("*.md")}
        return used

    def next_code(self) -> str:
        from cake_core.diagnostics.codes import lookup

        pat = re.compile(rf"{re.escape(self.prefix)}(\d+)")
        nums = [int(m.group(1)) for c in self.used_codes() if (m := pat.fullmatch(c))]
        n = max([100, *nums]) + 1
        while lookup(f"{self.prefix}{n}") is not None or f"{self.prefix}{n}" in \
                self.used_codes():
            n += 1
        return f"{self.prefix}{n}"

    def unique_name(self, name: str) -> str:
        taken = {i.name for i in self.items}
        if name not in taken:
            return name
        n = 2
        while f"{name}-{n}" in taken:
            n += 1
        return f"{name}-{n}"

    def module_path(self, module: str) -> Path:
        return self.root / self.pkg / "promoted" / f"{module}.py"

    def add(self, entry: ItemEntry, module_text: str, *, doc: str | None,
            examples: dict[str, str]) -> list[Path]:
        """Write one item (module, doc page, examples), then the manifest, the promoted
        package and the tests.  Returns the files written."""
        written = [self._write(f"{self.pkg}/promoted/{entry.module}.py", module_text)]
        if doc is not None and entry.code:
            written.append(self._write(f"docs/{entry.code}.md", doc))
        for rel, text in examples.items():
            written.append(self._write(rel, text))
        self.items.append(entry)
        written += self.regenerate()
        return written

    def regenerate(self) -> list[Path]:
        manifest = {"plugin": self.name, "package": self.pkg, "prefix": self.prefix,
                    "items": [vars(i) for i in self.items]}
        out = [self._write(MANIFEST, json.dumps(manifest, indent=2) + "\n")]
        out.append(self._write(f"{self.pkg}/promoted/__init__.py", self._promoted_init()))
        out.append(self._write("tests/test_promoted.py", self._tests()))
        return out

    def _promoted_init(self) -> str:
        imports: list[str] = []
        tuples: dict[str, list[str]] = {k: [] for k in TUPLES.values()}
        for n, item in enumerate(self.items):
            alias = f"_{item.kind}{n}"
            imports.append(f"from {self.pkg}.promoted.{item.module} import {item.attr} as "
                           f"{alias}")
            tuples[TUPLES[item.kind]].append(alias)
        body = "\n".join(f"{k}: tuple[Any, ...] = ({''.join(a + ', ' for a in v)})"
                         .replace(", )", ",)") for k, v in tuples.items())
        return PROMOTED_INIT.format(imports="\n".join(imports) + ("\n" if imports else ""),
                                    tuples=body)

    def _tests(self) -> str:
        from cake_agents.mining.templates import item_tests

        blocks = [item_tests(i, self.pkg) for i in self.items]
        return TESTS_HEADER.format(pkg=self.pkg) + "".join(blocks)


def _with_promoted_package(pyproject: str, pkg: str) -> str:
    """List `<pkg>.promoted` next to `<pkg>` where the packages are listed explicitly
    (`cake plugins new` does); automatic package discovery finds it by itself."""
    pat = re.compile(r'^(packages\s*=\s*\[)([^\]]*)(\])', re.M)
    m = pat.search(pyproject)
    if m is None or f'"{pkg}.promoted"' in m.group(2) or f'"{pkg}"' not in m.group(2):
        return pyproject
    inner = m.group(2).rstrip().rstrip(",")
    return pyproject[:m.start()] + f'{m.group(1)}{inner}, "{pkg}.promoted"{m.group(3)}' + \
        pyproject[m.end():]


README = '''# {name}

CAKE verifier rules, tactics, primitives and calibrations promoted from recurring
failures of `cake evolve` runs by `cake promote`.  `promoted.json` lists every item with
the failure signature it came from; `tests/examples/` keeps the failing kernels (and the
clean kernels they were derived from) as regression tests.

```sh
pip install -e .
cake plugins list --verbose
python -m pytest tests
```
'''

INIT = '''"""The {name} plugin: items promoted from recurring failures (see promoted.json)."""

from cake_core.plugins import Plugin

from {pkg}.promoted import extend

plugin = extend(Plugin(
    name="{name}",
    version="0.1.0",
    api={api},
    description="Items promoted from recurring failures by `cake promote`",
))
'''

HOOK = '''
# Items promoted from recurring failures by `cake promote` (see promoted.json).
from {pkg}.promoted import extend as _extend_promoted  # noqa: E402

{attr} = _extend_promoted({attr})
'''

PROMOTED_INIT = '''"""Items promoted from recurring failures.  Regenerated by `cake promote` from
promoted.json: edit the item modules, not this file."""

from __future__ import annotations

import dataclasses
from typing import Any

from cake_core.plugins import Plugin

{imports}
{tuples}


def extend(plugin: Any) -> Any:
    """The plugin with the promoted items added (a Plugin, or a factory returning one)."""
    if callable(plugin) and not isinstance(plugin, Plugin):
        factory = plugin
        return lambda: extend(factory())
    return dataclasses.replace(plugin, rules=(*plugin.rules, *RULES),
                               tactics=(*plugin.tactics, *TACTICS),
                               primitives=(*plugin.primitives, *PRIMITIVES),
                               calibrations=(*plugin.calibrations, *CALIBRATIONS))
'''

TESTS_HEADER = '''"""Regression tests of the items `cake promote` added (regenerated each time).

Every rule fires on each failing kernel it was promoted from (tests/examples/<item>/
fail_*.cake) and stays quiet on the clean kernels those were derived from (clean_*.cake)
and, when CAKE_EXAMPLES_DIR names a folder, on every kernel in it.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest
from cake_core.check import check_text
from cake_core.plugins import PluginSet, load_plugins

from {pkg} import plugin

EXAMPLES = Path(__file__).parent / "examples"


@cache
def _plugins() -> PluginSet:
    return load_plugins(include_installed=False, extra=[plugin])


def _codes(path: Path) -> set[str]:
    res = check_text(path.read_text(encoding="utf-8"), path.name, plugins=_plugins())
    return {{d.code for d in res.diagnostics}}


def _failing(item: str) -> list[Path]:
    files = sorted((EXAMPLES / item).glob("fail_*.cake"))
    assert files, f"no failing examples for {{item}}"
    return files


def _clean(item: str) -> list[Path]:
    files = sorted((EXAMPLES / item).glob("clean_*.cake"))
    project = os.environ.get("CAKE_EXAMPLES_DIR")
    if project:
        files += sorted(Path(project).glob("*.cake"))
    if not files:
        pytest.skip("no clean kernels to compare against (set CAKE_EXAMPLES_DIR)")
    return files
'''
