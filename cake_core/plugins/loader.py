"""Loading plugins from entry points, each in its own guard.

pluggy calls every implementation of a hook in one call, so one raising plugin loses
every other plugin's results; CAKE instead calls each plugin item separately.  A plugin
that fails to import, declares an incompatible API, collides with another's names,
raises, or overruns its time is reported (a CK902 diagnostic and `cake plugins doctor`)
and disabled; everything else keeps working.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import metadata

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.diagnostics.selection import Selection, unknown_selectors
from cake_core.plugins.api import PLUGIN_API_VERSION, Plugin, RuleItem, Tactic
from cake_core.plugins.builtin import builtin_plugin
from cake_core.plugins.config import ProjectConfig, did_you_mean
from cake_core.plugins.guard import run_guarded
from cake_core.plugins.sandbox import FIRST_PARTY, isolation_enabled
from cake_core.plugins.sandbox import isolate as isolated_plugin
from cake_core.plugins.sandbox import prestart as prestart_worker
from cake_core.primitives.registry import DuplicatePrimitiveError, Registry, builtin_registry
from cake_core.verify.cache import KernelVerdicts

ENTRY_POINT_GROUP = "cake.plugins"


@dataclass
class PluginFailure:
    plugin: str
    item: str | None
    reason: str


@dataclass
class PluginSet:
    """The plugins in effect for one project, with what failed along the way."""

    plugins: list[Plugin] = field(default_factory=list)
    failures: list[PluginFailure] = field(default_factory=list)
    disabled_items: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    """What is wrong with the project's `[tool.cake]`: shown by every front end."""
    selection: Selection = field(default_factory=Selection)
    """`[tool.cake]` select, ignore and extend-select: the codes every front end reports."""
    _registry: Registry | None = None
    _disabled_rules: set[tuple[str, str]] = field(default_factory=set)
    entry_points: dict[str, str] = field(default_factory=dict)
    """The entry point each installed plugin came from, by plugin name."""
    isolated: set[str] = field(default_factory=set)
    """Plugins whose rules run in the isolated worker (`sandbox.py`)."""
    verdicts: KernelVerdicts = field(default_factory=KernelVerdicts, repr=False, compare=False)
    """Per-kernel findings of the built-in rules, reused by later checks."""

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            reg = Registry(builtin_registry().all())
            for p in self.plugins:
                if p.name == "cake":
                    continue
                try:
                    trial = Registry(reg.all())
                    for prim in p.primitives:
                        if prim.key not in self.disabled_items:
                            trial.add(prim)
                except DuplicatePrimitiveError as exc:
                    self.failures.append(PluginFailure(p.name, None, str(exc)))
                    continue
                reg = trial
            self._registry = reg
        return self._registry

    def rules(self) -> list[tuple[Plugin, RuleItem]]:
        """The rules to run: a disabled code does not stop its rule, whose other codes
        still count (`shown` drops the disabled ones from its findings)."""
        return [(p, r) for p in self.plugins for r in p.rules
                if r.name not in self.disabled_items
                and (p.name, r.name) not in self._disabled_rules]

    def shown(self, findings: Iterable[Diagnostic]) -> list[Diagnostic]:
        """The findings whose code the project has not disabled."""
        return [d for d in findings if d.code not in self.disabled_items]

    def tactics(self) -> list[tuple[Plugin, Tactic]]:
        return [(p, t) for p in self.plugins for t in p.tactics
                if t.name not in self.disabled_items]

    def disable_rule(self, plugin: Plugin, rule: RuleItem, reason: str) -> None:
        self._disabled_rules.add((plugin.name, rule.name))
        self.failures.append(PluginFailure(plugin.name, rule.name, reason))


def _entry_points() -> Iterable[metadata.EntryPoint]:
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def load_plugins(config: ProjectConfig | None = None, *, include_installed: bool = True,
                 extra: Iterable[Plugin] = (), isolate: bool = True) -> PluginSet:
    """The built-in plugin, then every installed plugin that loads and is compatible.

    With `isolate`, the rules of plugins from other distributions than CAKE's own run in
    the isolated worker (`sandbox.py`); plugins given in `extra` run in process."""
    config = config or ProjectConfig()
    ps = PluginSet(disabled_items=set(config.disabled_items), selection=config.selection)
    ps.plugins.append(builtin_plugin())
    seen = {"cake"}
    candidates: list[tuple[str, object, str | None]] = []
    if include_installed:
        for ep in _entry_points():
            if ep.name in config.disabled_plugins:
                continue
            try:
                obj = ep.load()
            except Exception as exc:  # a plugin that cannot import must not stop CAKE
                ps.failures.append(PluginFailure(ep.name, None, f"failed to import: "
                                                 f"{type(exc).__name__}: {exc}"))
                continue
            dist = getattr(ep, "dist", None)
            candidates.append((ep.name, obj, getattr(dist, "name", None) or "?"))
    candidates += [(getattr(p, "name", getattr(p, "__name__", "?")), p, None) for p in extra]
    for name, obj, dist_name in candidates:
        try:
            plugin = obj() if callable(obj) and not isinstance(obj, Plugin) else obj
        except Exception as exc:
            ps.failures.append(PluginFailure(name, None, f"failed to build: "
                                             f"{type(exc).__name__}: {exc}"))
            continue
        if not isinstance(plugin, Plugin):
            ps.failures.append(PluginFailure(name, None, "entry point is not a cake Plugin"))
            continue
        if plugin.name in config.disabled_plugins:
            continue
        if plugin.api != PLUGIN_API_VERSION:
            ps.failures.append(PluginFailure(
                plugin.name, None, f"written for plugin API {plugin.api}, but this CAKE "
                f"provides API {PLUGIN_API_VERSION}; upgrade the plugin (or CAKE)"))
            continue
        if plugin.name in seen:
            ps.failures.append(PluginFailure(plugin.name, None, "a plugin with this name is "
                                             "already loaded"))
            continue
        clash = _code_clash(plugin)
        if clash:
            ps.failures.append(PluginFailure(plugin.name, None, clash))
            continue
        seen.add(plugin.name)
        if dist_name is not None:
            ps.entry_points[plugin.name] = name
            if isolate and dist_name not in FIRST_PARTY and isolation_enabled() \
                    and plugin.rules:
                plugin = isolated_plugin(plugin, name)
                ps.isolated.add(plugin.name)
        ps.plugins.append(plugin)
    if ps.isolated:
        prestart_worker()  # its imports overlap the caller's parsing
    _ = ps.registry  # resolve primitive clashes now, so doctor sees them
    ps.warnings = [*config.problems, *_unknown_items(ps, config)]
    return ps


def _unknown_items(ps: PluginSet, config: ProjectConfig) -> list[str]:
    """One warning per entry of `disable` that is no code, rule, tactic or primitive of
    the loaded plugins, and per selector that matches no code (a misspelt code would
    otherwise hide or select nothing, silently)."""
    known_codes = {r.code for r in codes.all_rules()}
    known_codes |= {c.code for p in ps.plugins for r in p.rules for c in r.codes}
    known = set(known_codes)
    for p in ps.plugins:
        known |= {r.name for r in p.rules}
        known |= {t.name for t in p.tactics} | {prim.key for prim in p.primitives}
    where = config.path or "[tool.cake]"
    return [*(f"{where}: tool.cake.disable: {item!r} is no code, rule, tactic or primitive"
              f"{did_you_mean(item, known)}" for item in sorted(config.disabled_items - known)),
            *(f"{where}: tool.cake: selector {s!r} matches no code"
              f"{did_you_mean(s, known_codes)}"
              for s in unknown_selectors(config.selection, known_codes))]


def _code_clash(plugin: Plugin) -> str | None:
    for r in plugin.rules:
        for rule in r.codes:
            try:
                codes.register(rule)
            except codes.DuplicateCodeError as exc:
                return str(exc)
    return None


def run_rule(ps: PluginSet, plugin: Plugin, rule: RuleItem, program: object,
             source: object) -> list[Diagnostic]:
    """Run one plugin rule in a guard: exceptions and overruns disable it, not CAKE."""
    if plugin.name == "cake":
        return rule.check(program, source)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    result, reason = run_guarded(rule.check, program, source, rule.timeout_s)
    if reason is None:
        return [d if d.source != "cake" else _tag(d, plugin.name) for d in result]
    ps.disable_rule(plugin, rule, reason)
    elapsed = time.perf_counter() - t0
    return [codes.PLUGIN_FAILURE.at(
        source.span(0, 0),  # type: ignore[attr-defined]
        f"plugin rule {plugin.name}:{rule.name} {reason}; it is disabled for this run",
        notes=[f"after {elapsed * 1e3:.0f} ms", "run `cake plugins doctor` for details"])]


def _tag(d: Diagnostic, plugin: str) -> Diagnostic:
    return replace(d, source=plugin)
