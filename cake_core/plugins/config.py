"""Project settings from `[tool.cake]` in the nearest pyproject.toml.

```toml
[tool.cake]
arch = "sm_90a"                      # default arch when a kernel names none
disable-plugins = ["cake-kmeans"]     # whole plugins
disable = ["KM101", "persistent-tiles"]  # single items: codes, rule/tactic/primitive names
select = ["CK"]                      # codes or prefixes to report (default: all)
ignore = ["CK4"]                     # codes or prefixes not to report
extend-select = ["KM1"]              # added to select
fix = true                           # `cake check` applies the safe fixes (as --fix)
unsafe-fixes = false                 # ... and the unsafe ones too (as --unsafe-fixes)
```

A code in `disable` hides the findings of that code and nothing else (`PluginSet.shown`);
a name turns off that rule, tactic or primitive.  `select`, `ignore` and `extend-select`
choose codes by prefix, as ruff does (`cake_core/diagnostics/selection.py`); `ignore`
hides findings exactly as `disable` does, after inline suppression, so `ignore = ["CK302"]`
and `disable = ["CK302"]` show the same, and the command line's `--select` and `--ignore`
override these three keys but never `disable`.  `fix` and `unsafe-fixes` are what `cake
check` does when the command line says neither `--fix`/`--no-fix` nor
`--unsafe-fixes`/`--no-unsafe-fixes`.  Problems with the file are collected, not
raised: `PluginSet.warnings` adds the entries of `disable` that name nothing, and every
front end shows them.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cake_core.diagnostics.selection import Selection

#: The keys `[tool.cake]` may hold.
KEYS = ("arch", "disable-plugins", "disable", "select", "ignore", "extend-select", "fix",
        "unsafe-fixes")


@dataclass(frozen=True)
class ProjectConfig:
    arch: str | None = None
    disabled_plugins: frozenset[str] = frozenset()
    disabled_items: frozenset[str] = frozenset()
    path: Path | None = None
    problems: tuple[str, ...] = field(default=())
    selection: Selection = field(default_factory=Selection)
    fix: bool = False
    unsafe_fixes: bool = False


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for d in [start, *start.parents] if start.is_dir() else [start.parent, *start.parent.parents]:
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path | None = None) -> ProjectConfig:
    """Read [tool.cake]; a malformed file yields defaults plus a problem message."""
    path = find_pyproject(start or Path.cwd())
    if path is None:
        return ProjectConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return ProjectConfig(path=path, problems=(f"{path}: cannot read [tool.cake]: {exc}",))
    section = data.get("tool", {}).get("cake", {})
    if not isinstance(section, dict):
        return ProjectConfig(path=path, problems=(f"{path}: [tool.cake] must be a table",))
    problems = []

    def strings(key: str) -> frozenset[str]:
        v = section.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            problems.append(f"{path}: tool.cake.{key} must be a list of strings")
            return frozenset()
        return frozenset(v)

    def flag(key: str) -> bool:
        v = section.get(key, False)
        if not isinstance(v, bool):
            problems.append(f"{path}: tool.cake.{key} must be true or false")
            return False
        return v

    arch = section.get("arch")
    if arch is not None and not isinstance(arch, str):
        problems.append(f"{path}: tool.cake.arch must be a string")
        arch = None
    for key in sorted(set(section) - set(KEYS)):
        problems.append(f"{path}: unknown key tool.cake.{key}{did_you_mean(key, KEYS)}")
    selection = Selection(tuple(sorted(strings("select"))) if "select" in section else None,
                          tuple(sorted(strings("ignore"))),
                          tuple(sorted(strings("extend-select"))))
    fix, unsafe_fixes = flag("fix"), flag("unsafe-fixes")
    return ProjectConfig(arch, strings("disable-plugins"), strings("disable"), path,
                         tuple(problems), selection, fix, unsafe_fixes)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the closest known name, or "" when none is close."""
    hit = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {hit[0]!r}?" if hit else ""
