"""The verifier: passes over the typed IR that find resource, layout and sync bugs.

Each built-in pass lives in its own module and exposes `check(program, source)` and
`CODES`, every code it may emit (what `[tool.cake] disable` is checked against); the
list below is explicit (no registration by import side effect).  Plugin rules are
added to the same list by the plugin loader.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from cake_core.diagnostics.model import Diagnostic
from cake_core.ir.kernel import Program
from cake_core.source import SourceFile

Pass = Callable[[Program, SourceFile], list[Diagnostic]]

#: Modules under cake_core.verify that hold built-in passes, in the order they run.
BUILTIN_PASSES: tuple[str, ...] = ("resources", "placement", "layout", "bounds", "sync",
                                   "divergence", "tile_loops", "uninitialized", "scalar_source")


def builtin_passes() -> list[Pass]:
    return [importlib.import_module(f"cake_core.verify.{m}").check for m in BUILTIN_PASSES]
