"""Plugins: rules, primitives, tactics and calibrations from entry points (`cake.plugins`)."""

from cake_core.plugins.api import (
    PLUGIN_API_VERSION,
    CalibrationItem,
    Plugin,
    RuleItem,
    Tactic,
    TacticResult,
)
from cake_core.plugins.config import ProjectConfig, load_config
from cake_core.plugins.loader import PluginFailure, PluginSet, load_plugins, run_rule

__all__ = ["PLUGIN_API_VERSION", "CalibrationItem", "Plugin", "PluginFailure", "PluginSet",
           "ProjectConfig", "RuleItem", "Tactic", "TacticResult", "load_config",
           "load_plugins", "run_rule"]
