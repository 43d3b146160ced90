"""Project settings from `[tool.cake]` in the nearest pyproject.toml.

```toml
[tool.cake]
arch = "sm_90a"                      # default arch when a kernel names none
disable-plugins = ["cake-kmeans"]     # whole plugins
disable = ["KM101", "persistent-tiles"]  # single items: rule codes, rule/tactic names
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ProjectConfig:
    arch: str | None = None
    disabled_plugins: frozenset[str] = frozenset()
    disabled_items: frozenset[str] = frozenset()
    path: Path | None = None
    problems: tuple[str, ...] = field(default=())


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

    arch = section.get("arch")
    if arch is not None and not isinstance(arch, str):
        problems.append(f"{path}: tool.cake.arch must be a string")
        arch = None
    unknown = set(section) - {"arch", "disable-plugins", "disable"}
    if unknown:
        problems.append(f"{path}: unknown [tool.cake] keys: {', '.join(sorted(unknown))}")
    return ProjectConfig(arch, strings("disable-plugins"), strings("disable"), path,
                         tuple(problems))
