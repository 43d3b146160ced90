"""Verifier passes run one by one, each in a guard, for as long as the server lives.

The passes are the rules of the loaded plugins (CAKE's own first).  The server hands
`check_source` wrapped passes.  A pass that raises or returns something other than a
list of diagnostics yields a CK902 diagnostic, is disabled for the rest of the session
(the CK902 stays on every file it would have checked), and the other passes still run.
Plugins that failed to load are reported the same way.

Every pass except CAKE's own also has a time limit: its rule's `timeout_s`, at most one
second.  (The built-in rules declare no limit in `cake_core.plugins.builtin`, and a
transient stall must not switch off the compiler's own findings for a whole session.)
How a pass is run and stopped is `cake_core.plugins.guard`'s business (CPU time, not
the wall clock; an exception raised inside a runaway pass's thread).

For tests, `CAKE_LSP_TEST_PASSES` adds passes: a comma-separated list of
`module:function` whose modules live under `tests.` (nothing else is imported from it).
"""

from __future__ import annotations

import importlib
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.ir.kernel import Program
from cake_core.plugins import PluginSet
from cake_core.plugins.guard import WALL_FACTOR, run_guarded
from cake_core.plugins.sandbox import IsolatedCheck
from cake_core.source import SourceFile
from cake_core.verify import Pass

TEST_PASSES_ENV = "CAKE_LSP_TEST_PASSES"
PASS_TIME_LIMIT_S = 1.0


@dataclass(frozen=True, slots=True)
class NamedPass:
    name: str
    """How settings and messages refer to it: `plugin:rule`, e.g. `cake:sync`."""
    origin: str
    """The plugin it comes from ("cake" for the built-ins)."""
    run: Pass | None
    codes: frozenset[str] = frozenset()
    time_limit: float = PASS_TIME_LIMIT_S
    """CPU seconds it may use per check; infinite for the built-in rules."""
    load_error: str | None = None

    def matches(self, names: frozenset[str]) -> bool:
        """Whether `plugins.disabled` names it: by full name, plugin, rule or code."""
        rule = self.name.partition(":")[2]
        return bool({self.name, self.origin, rule} & names or self.codes & names)


@dataclass
class PassGuard:
    passes: list[NamedPass]
    on_disable: Callable[[str, str], None] | None = None
    """Called (from a worker thread) with the pass name and why it was disabled."""
    failures: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_plugins(cls, plugins: PluginSet,
                     environ: dict[str, str] | None = None) -> PassGuard:
        passes = [NamedPass(f"{p.name}:{r.name}", p.name, _tagged(r.check, p.name),
                            frozenset(c.code for c in r.codes),
                            math.inf if p.name == "cake" else
                            min(r.timeout_s, PASS_TIME_LIMIT_S))
                  for p, r in plugins.rules()]
        passes += [NamedPass(f.plugin + (f":{f.item}" if f.item else ""), f.plugin, None,
                             load_error=f.reason) for f in plugins.failures]
        env = os.environ if environ is None else environ
        for item in filter(None, (s.strip() for s in env.get(TEST_PASSES_ENV, "").split(","))):
            module, _, func = item.partition(":")
            passes.append(_load(item, module, func or "check"))
        guard = cls(passes)
        for p in guard.passes:
            if p.load_error is not None:
                guard.failures[p.name] = p.load_error
        return guard

    def active(self, disabled: frozenset[str]) -> list[Pass]:
        """The passes to give `check_source`, minus those the settings disable."""
        return [self._wrap(p) for p in self.passes if not p.matches(disabled)]

    def split(self, disabled: frozenset[str]) -> tuple[dict[str, Pass], list[Pass]]:
        """The active passes as (CAKE's own by name, which judge each kernel alone and so
        may be run kernel by kernel with reuse; every other pass)."""
        active = [p for p in self.passes if not p.matches(disabled)]
        return ({p.name: self._wrap(p) for p in active if p.origin == "cake"},
                [self._wrap(p) for p in active if p.origin != "cake"])

    def _wrap(self, p: NamedPass) -> Pass:
        def guarded(program: Program, source: SourceFile) -> list[Diagnostic]:
            return self._call(p, program, source)

        return guarded

    def _call(self, p: NamedPass, program: Program, source: SourceFile) -> list[Diagnostic]:
        reason = self.failures.get(p.name)
        if reason is None and p.run is not None:
            result, reason = run_guarded(p.run, program, source, p.time_limit)
            if reason is None:
                return result
            self._disable(p.name, reason)
        return [codes.PLUGIN_FAILURE.at(
            source.span(0, 0), f"`{p.name}` is disabled for this session: it {reason}",
            notes=["its findings are missing from this file's diagnostics",
                   "restart the language server to run it again"],
            data={"pass": p.name, "origin": p.origin})]

    def _disable(self, name: str, reason: str) -> None:
        with self._lock:
            first = name not in self.failures
            self.failures[name] = reason
        if first and self.on_disable is not None:
            self.on_disable(name, reason)


def _load(name: str, module: str, func: str) -> NamedPass:
    """A test pass named in the environment (only modules under `tests.` are imported)."""
    if not module.startswith("tests."):
        return NamedPass(name, module, None,
                         load_error=f"not loaded: {module} is not a module under tests.")
    try:
        fn = getattr(importlib.import_module(module), func)
    except Exception as exc:  # a broken pass must not stop the server
        return NamedPass(name, module, None,
                         load_error=f"failed to load: {type(exc).__name__}: {exc}")
    if not callable(fn):
        return NamedPass(name, module, None, load_error=f"{module}.{func} is not callable")
    return NamedPass(name, module, fn)


def _tagged(check: Pass, plugin: str) -> Pass:
    """A plugin rule's findings carry the plugin's name as their source."""
    if plugin == "cake" or isinstance(check, IsolatedCheck):
        return check  # an isolated rule's worker tags its findings itself

    def run(program: Program, source: SourceFile) -> list[Diagnostic]:
        found = check(program, source)
        if not isinstance(found, list):
            return found
        return [replace(d, source=plugin) if isinstance(d, Diagnostic) and d.source == "cake"
                else d for d in found]

    return run


__all__ = ["PASS_TIME_LIMIT_S", "TEST_PASSES_ENV", "WALL_FACTOR", "NamedPass", "PassGuard"]
