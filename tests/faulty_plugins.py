"""Installs real entry-point plugins into a private folder (never into the test env):
three faulty ones (a rule that raises, one that loops forever, one that allocates without
bound) and a healthy one, each its own distribution, as a third party would ship them.
Tests put the folder on PYTHONPATH of a `cake check` or `cake lsp` subprocess."""

from __future__ import annotations

from pathlib import Path

MODULE = '''
from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Severity
from cake_core.plugins import Plugin, RuleItem

NOTE = Rule("GP101", "kernel-note", "Notes every kernel.", severity=Severity.INFO,
            origin="good-plugin")


def _note(program, source):
    return [NOTE.at(k.name_span, f"kernel {k.name}") for k in program.kernels]


def _raise(program, source):
    raise RuntimeError("plugin bug")


def _loop(program, source):
    while True:
        pass


def _alloc(program, source):
    hoard = []
    while True:
        hoard.append(bytearray(32 << 20))


def good():
    return Plugin("good-plugin", "0.1", rules=(RuleItem("note", (NOTE,), _note),))


def raising():
    return Plugin("faulty-raise", "0.1", rules=(RuleItem("raise", (), _raise),))


def looping():
    return Plugin("faulty-loop", "0.1", rules=(RuleItem("loop", (), _loop),))


def allocating():
    return Plugin("faulty-alloc", "0.1", rules=(RuleItem("alloc", (), _alloc),))
'''

PLUGINS = {"good-plugin": "good", "faulty-raise": "raising", "faulty-loop": "looping",
           "faulty-alloc": "allocating"}
FAULTY = ("faulty-raise", "faulty-loop", "faulty-alloc")
MEMORY_MB = "256"
"""CAKE_PLUGIN_MEMORY_MB for the tests: the allocating rule stops early and cheaply."""


def write_site(site: Path) -> Path:
    """One distribution per plugin (a dist-info with its entry point), one shared module."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "cake_test_plugins.py").write_text(MODULE, encoding="utf-8")
    for name, func in PLUGINS.items():
        info = site / f"{name.replace('-', '_')}-0.1.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
                                       encoding="utf-8")
        (info / "entry_points.txt").write_text(
            f"[cake.plugins]\n{name} = cake_test_plugins:{func}\n", encoding="utf-8")
    return site
