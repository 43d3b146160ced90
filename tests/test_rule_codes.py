"""Rules own their codes: each pass emits only the codes it declares, every declared code is
in the table, and `[tool.cake] disable` hides exactly the codes it names."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core import check as check_module
from cake_core.check import check_source, check_text
from cake_core.diagnostics.codes import Rule, all_rules, lookup
from cake_core.diagnostics.model import Diagnostic, Severity
from cake_core.ir.kernel import Program
from cake_core.plugins import Plugin, ProjectConfig, RuleItem, load_config, load_plugins
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[1]
KERNEL_DIRS = ("tests/bugs", "tests/errors", "examples", "bench/data")
KERNELS = sorted([*(f for d in KERNEL_DIRS for f in (ROOT / d).rglob("*.cake")),
                  *ROOT.glob("plugins/*/tests/data/*.cake")])
RULES = [(p.name, r) for p, r in load_plugins(load_config(ROOT)).rules()]

EXPECT_TX_SHORT = (ROOT / "tests/bugs/sync_expect_tx_one_tile_short.cake").read_text()
# one more stage overflows shared memory (CK201) and the CK302 stays
WITH_OVERFLOW = EXPECT_TX_SHORT.replace("STAGES = 128, 256, 64, 4", "STAGES = 128, 256, 64, 5")
# and more registers for the consumers oversubscribe the register file (CK202)
WITH_REGISTERS = WITH_OVERFLOW.replace("regs=232", "regs=240")


def _programs() -> list[tuple[Path, SourceFile, Program]]:
    out = []
    for path in KERNELS:
        res = check_source(SourceFile.read(path, path.as_posix()), passes=[])
        if res.program is not None and not res.errors:
            out.append((path, res.source, res.program))
    return out


@pytest.mark.parametrize(("plugin", "rule"), RULES, ids=[f"{p}:{r.name}" for p, r in RULES])
def test_a_rule_emits_only_the_codes_it_declares(plugin: str, rule: RuleItem) -> None:
    declared = {c.code for c in rule.codes}
    assert declared, f"{plugin}:{rule.name} declares no codes"
    for path, source, program in _programs():
        emitted = {d.code for d in rule.check(program, source)}
        assert emitted <= declared, f"{plugin}:{rule.name} on {path.name}: {emitted - declared}"


@pytest.mark.parametrize(("plugin", "rule"), RULES, ids=[f"{p}:{r.name}" for p, r in RULES])
def test_declared_codes_are_in_the_table(plugin: str, rule: RuleItem) -> None:
    for code in rule.codes:
        assert lookup(code.code) == code


def _codes(text: str, disable: set[str]) -> list[str]:
    ps = load_plugins(ProjectConfig(disabled_items=frozenset(disable)), include_installed=False)
    return sorted(d.code for d in check_text(text, "k.cake", plugins=ps).diagnostics)


def test_disabling_ck302_hides_ck302_and_nothing_else(tmp_path: Path) -> None:
    assert _codes(WITH_OVERFLOW, set()) == ["CK201", "CK302"]
    (tmp_path / "pyproject.toml").write_text('[tool.cake]\ndisable = ["CK302"]\n')
    ps = load_plugins(load_config(tmp_path), include_installed=False)
    found = check_text(WITH_OVERFLOW, "k.cake", plugins=ps).diagnostics
    assert [d.code for d in found] == ["CK201"] and ps.warnings == []


def test_disabling_ck201_keeps_ck202() -> None:
    assert _codes(WITH_REGISTERS, set()) == ["CK201", "CK202", "CK302"]
    assert _codes(WITH_REGISTERS, {"CK201"}) == ["CK202", "CK302"]


KERNEL = """
@kernel(arch="sm_90a", grid=(1,), warps=4)
def nothing(A: Tensor[f32, (128, 64)]):
    x = load(A.tile((128, 64), (0, 0)))
    store(A.tile((128, 64), (0, 0)), x)
"""


def _every_code(program: Program, source: SourceFile) -> list[Diagnostic]:
    return [Rule(r.code, r.name, r.summary, Severity.INFO).at(source.span(0, 0), r.name)
            for r in all_rules()]


EVERY_CODE = Plugin("test-every-code", "1.0",
                    rules=(RuleItem("every-code", (), _every_code),))


@pytest.mark.parametrize("code", [r.code for r in all_rules()])
def test_every_code_in_the_table_can_be_disabled(code: str) -> None:
    config = ProjectConfig(disabled_items=frozenset({code}))
    ps = load_plugins(config, include_installed=False, extra=[EVERY_CODE])
    found = {d.code for d in check_text(KERNEL, "k.cake", plugins=ps).diagnostics}
    assert ps.warnings == []
    assert found == {r.code for r in all_rules()} - {code}


BAD_CONFIG = '[tool.cake]\ndisable = ["CK0302", "CK201"]\ndisabel = ["CK101"]\n'


def test_unknown_codes_and_keys_are_warnings_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(BAD_CONFIG)
    ps = load_plugins(load_config(tmp_path), include_installed=False)
    path = tmp_path.resolve() / "pyproject.toml"
    assert ps.warnings == [
        f"{path}: unknown key tool.cake.disabel; did you mean 'disable'?",
        f"{path}: tool.cake.disable: 'CK0302' is no code, rule, tactic or primitive; "
        "did you mean 'CK302'?"]


def test_cake_check_prints_the_config_warnings_once(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(BAD_CONFIG)
    for name in ("a.cake", "b.cake"):
        (tmp_path / name).write_text(KERNEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check_module, "_DEFAULT_PLUGINS", None)
    r = CliRunner().invoke(main, ["check", "a.cake", "b.cake"])
    monkeypatch.setattr(check_module, "_DEFAULT_PLUGINS", None)
    assert r.exit_code == 0, r.output
    assert r.stderr.count("warning: ") == 2
    assert r.stderr.count("'CK0302' is no code") == 1 and "did you mean 'CK302'?" in r.stderr
    assert r.stderr.count("tool.cake.disabel") == 1 and "pyproject.toml" in r.stderr


def test_the_language_server_shows_the_config_warnings(tmp_path: Path) -> None:
    from cake_lsp.server import CakeLanguageServer

    (tmp_path / "pyproject.toml").write_text(BAD_CONFIG)
    server = CakeLanguageServer(exit_process=False, environ={"CAKE_LSP_GC": "default"})
    shown: list[str] = []
    server.window_show_message = lambda params: shown.append(params.message)  # type: ignore
    server.load_plugins(tmp_path)
    assert len(shown) == 2 and all(m.startswith("CAKE: ") for m in shown)
    assert any("'CK0302' is no code" in m and "pyproject.toml" in m for m in shown)
