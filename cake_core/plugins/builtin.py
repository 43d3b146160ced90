"""CAKE's own rules, primitives and tactics, packaged as a plugin like any other."""

from __future__ import annotations

import importlib

from cake_core import __version__
from cake_core.plugins.api import Plugin, RuleItem
from cake_core.primitives.registry import builtin_registry
from cake_core.verify import BUILTIN_PASSES


def builtin_plugin() -> Plugin:
    rules = []
    for mod_name in BUILTIN_PASSES:
        mod = importlib.import_module(f"cake_core.verify.{mod_name}")
        rules.append(RuleItem(mod_name, mod.CODES, mod.check, timeout_s=float("inf")))
    return Plugin("cake", __version__, rules=tuple(rules),
                  primitives=tuple(builtin_registry().all()),
                  description="CAKE's built-in rules, primitives and tactics")
