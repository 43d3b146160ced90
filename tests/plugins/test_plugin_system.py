"""The plugin system: isolation of faulty plugins, API versions, config, provenance."""

from __future__ import annotations

import time

from cake_core.check import check_text
from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Severity
from cake_core.plugins import (
    PLUGIN_API_VERSION,
    Plugin,
    ProjectConfig,
    RuleItem,
    load_config,
    load_plugins,
)
from cake_core.primitives.registry import Primitive, Provenance, builtin_registry

KERNEL = """
M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, 128),), warps=4)
def copy(A: Tensor[f32, (M, 64)], B: Tensor[f32, (M, 64)]):
    x = load(A.tile((128, 64), (block.x, 0)))
    store(B.tile((128, 64), (block.x, 0)), x)
"""

OK_RULE = Rule("TP101", "always-note", "A test rule that notes every kernel.",
               severity=Severity.INFO, origin="test-ok")


def _note(program, source):
    return [OK_RULE.at(k.name_span, f"kernel {k.name}") for k in program.kernels]


def _boom(program, source):
    raise RuntimeError("plugin bug")


def _slow(program, source):
    end = time.perf_counter() + 5.0  # CPU-bound: the guard limits CPU time, and stops it
    while time.perf_counter() < end:
        pass
    return []


GOOD = Plugin("test-ok", "1.0", rules=(RuleItem("note", (OK_RULE,), _note),))
BOOM = Plugin("test-boom", "1.0", rules=(RuleItem("boom", (), _boom),))
SLOW = Plugin("test-slow", "1.0", rules=(RuleItem("slow", (), _slow, timeout_s=0.05),))


def test_a_raising_rule_is_reported_and_others_survive() -> None:
    ps = load_plugins(include_installed=False, extra=[BOOM, GOOD])
    res = check_text(KERNEL, "k.cake", plugins=ps)
    codes = sorted(d.code for d in res.diagnostics)
    assert codes == ["CK902", "TP101"]
    failure = next(d for d in res.diagnostics if d.code == "CK902")
    assert "test-boom:boom raised RuntimeError: plugin bug" in failure.message
    # disabled for the rest of the session: a second check runs only the good rule
    again = check_text(KERNEL, "k.cake", plugins=ps)
    assert [d.code for d in again.diagnostics] == ["TP101"]
    assert [f.plugin for f in ps.failures] == ["test-boom"]


def test_an_overrunning_rule_is_disabled() -> None:
    ps = load_plugins(include_installed=False, extra=[SLOW])
    res = check_text(KERNEL, "k.cake", plugins=ps)
    assert [d.code for d in res.diagnostics] == ["CK902"]
    assert "ran longer than 0.05 s" in res.diagnostics[0].message


def test_incompatible_api_is_refused_with_a_message() -> None:
    old = Plugin("test-old", "0.1", api=PLUGIN_API_VERSION + 1)
    ps = load_plugins(include_installed=False, extra=[old])
    assert [p.name for p in ps.plugins] == ["cake"]
    assert "plugin API" in ps.failures[0].reason


def test_plugin_that_is_not_a_plugin_and_one_that_fails_to_build() -> None:
    def broken() -> Plugin:
        raise ImportError("missing dependency")

    ps = load_plugins(include_installed=False, extra=["not a plugin"])  # type: ignore[list-item]
    ps2 = load_plugins(include_installed=False, extra=[broken])  # type: ignore[list-item]
    assert ps.failures[0].reason == "entry point is not a cake Plugin"
    assert "failed to build: ImportError: missing dependency" in ps2.failures[0].reason
    assert [p.name for p in ps2.plugins] == ["cake"]


def test_primitive_name_clash_disables_the_plugin_not_cake() -> None:
    dup = builtin_registry().function("wgmma")
    assert dup is not None
    clash = Plugin("test-clash", "1.0", primitives=(
        Primitive("wgmma", "mma", dup.params, dup.type_rule, "Shadow.",
                  facets=dup.facets, plugin="test-clash"),))
    ps = load_plugins(include_installed=False, extra=[clash])
    assert ps.registry.function("wgmma") is dup
    assert any("already registered" in f.reason for f in ps.failures)


def test_config_disables_plugins_and_items(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cake]\ndisable-plugins = ["test-boom"]\ndisable = ["TP101"]\n')
    cfg = load_config(tmp_path)
    assert cfg.disabled_plugins == {"test-boom"} and cfg.disabled_items == {"TP101"}
    ps = load_plugins(cfg, include_installed=False, extra=[BOOM, GOOD])
    assert [p.name for p in ps.plugins] == ["cake", "test-ok"]
    assert check_text(KERNEL, "k.cake", plugins=ps).diagnostics == []


def test_bad_config_is_reported_not_fatal(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cake]\ndisable = "x"\ncolour = 1\n')
    cfg = load_config(tmp_path)
    assert isinstance(cfg, ProjectConfig)
    assert any("must be a list" in p for p in cfg.problems)
    assert any(p.endswith("unknown key tool.cake.colour") for p in cfg.problems)


def test_items_carry_provenance() -> None:
    prov = Provenance("signature:CK301/wgmma-acc-read", "2026-11-30", ("bugs/x.cake",))
    p = Plugin("test-prov", "1.0", rules=(RuleItem("r", (), _note, prov),))
    assert p.items() == [("rule", "r", prov)]
