"""`cake check`'s ruff-style options, run as a user runs them, on real files in tmp_path:
--fix, --unsafe-fixes, --diff, --select/--ignore/--extend-select, --exit-zero, --statistics,
-q, stdin, and their `[tool.cake]` equivalents."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cake_cli.main import main
from cake_core import check as check_module
from cake_core.check import check_source
from cake_core.diagnostics.model import Applicability
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parent.parent
BUGS = sorted(f for f in (ROOT / "tests/bugs").glob("*.cake")
              if not f.name.endswith(".fixed.cake"))
WGMMA = ROOT / "tests/bugs/sync_wgmma_release_before_wait.cake"
STAGES = ROOT / "tests/bugs/smem_overflow_stages.cake"
CLEAN = ROOT / "tests/bugs/sync_wgmma_release_before_wait.fixed.cake"


def _cake(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["check", *args], input=input)


def _safe(path: Path) -> tuple[list[str], list[str]]:
    """The codes of `path`'s findings with a safe fix, and those without."""
    found = check_source(SourceFile.read(path, path.name)).diagnostics
    safe = [d.code for d in found
            if any(f.applicability is Applicability.SAFE for f in d.fixes)]
    return safe, [d.code for d in found if d.code not in safe]


def _codes(r: Result) -> set[str]:
    """The codes in a --statistics report."""
    return {line.split()[1] for line in r.stdout.splitlines()[:-1]}


@pytest.fixture
def bugs(tmp_path: Path) -> Path:
    for f in BUGS:
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_fix_applies_every_safe_fix_of_the_bug_corpus(bugs: Path) -> None:
    expected = {f.name: _safe(f) for f in BUGS}
    r = _cake(str(bugs), "--fix")
    n_safe = sum(len(safe) for safe, _ in expected.values())
    assert n_safe >= 15 and r.stdout.startswith(f"fixed {n_safe} findings\n")
    assert r.exit_code == 1  # the findings without a safe fix remain
    for name, (safe, rest) in expected.items():
        after = [d.code for d in check_source(SourceFile.read(bugs / name, name)).diagnostics]
        # a rule's safe fix is complete: the file checks clean once its findings are fixed
        assert after == rest, name
        if not safe:
            assert (bugs / name).read_bytes() == (ROOT / "tests/bugs" / name).read_bytes()


# The bugs whose safe fix writes exactly the hand-fixed twin's code; the other four fix
# differently but as completely (an extra `wgmma_wait(0)`, `49152` for `BM * BK * 2 + ...`).
AS_THE_TWIN = ("ldmatrix_unswizzled", "padded_cp_async_conflict", "padded_tma_destination",
               "setmaxnreg_bad_count", "setmaxnreg_on_sm80", "swizzle128_64B_rows",
               "swizzle64_tma_128B_box", "sync_barrier_init_not_fenced",
               "sync_cp_async_no_barrier_after_wait", "sync_missing_fence_before_tma_store",
               "sync_parity_never_flips", "sync_ring_parity_from_k",
               "sync_tma_store_buffer_reused", "sync_wgmma_epilogue_without_wait",
               "transpose_store_conflict", "wgmma_row_major_operand")


def _code(text: str) -> str:
    """The text less its leading comment lines (a bug and its twin describe themselves)."""
    lines = text.split("\n")
    while lines and lines[0].startswith("#"):
        lines = lines[1:]
    return "\n".join(lines)


@pytest.mark.parametrize("name", AS_THE_TWIN)
def test_fix_writes_the_hand_fixed_twin(tmp_path: Path, name: str) -> None:
    kernel = tmp_path / f"{name}.cake"
    shutil.copy(ROOT / "tests/bugs" / kernel.name, kernel)
    r = _cake(str(kernel), "--fix")
    assert r.exit_code == 0 and r.stdout == "fixed 1 finding\nchecked 1 file: no problems found\n"
    twin = (ROOT / "tests/bugs" / f"{name}.fixed.cake").read_text()
    assert _code(kernel.read_text()) == _code(twin)


def test_unsafe_fixes_need_the_flag(tmp_path: Path) -> None:
    kernel = tmp_path / STAGES.name
    shutil.copy(STAGES, kernel)
    r = _cake(str(kernel), "--fix")
    assert r.exit_code == 1 and "fixed" not in r.stdout and "CK201" in r.stdout
    assert kernel.read_bytes() == STAGES.read_bytes()
    r = _cake(str(kernel), "--fix", "--unsafe-fixes")
    assert r.exit_code == 0, r.output
    assert check_source(SourceFile.read(kernel)).diagnostics == []


def test_diff_shows_the_fixes_and_writes_nothing(bugs: Path) -> None:
    before = {f.name: f.read_bytes() for f in bugs.iterdir()}
    r = _cake(str(bugs), "--diff")
    assert r.exit_code == 1
    assert {f.name: f.read_bytes() for f in bugs.iterdir()} == before
    assert "+            wgmma_wait(0)\n" in r.stdout and r.stdout.count("\n@@ ") >= 15
    assert "would fix" in r.stderr
    clean = _cake(str(CLEAN), "--diff")
    assert clean.exit_code == 0 and clean.stdout == ""


def test_select_and_ignore_by_code_and_prefix(bugs: Path) -> None:
    everything = _codes(_cake(str(bugs), "--statistics"))
    assert {"CK201", "CK302", "CK306", "CK404"} <= everything
    sync = _codes(_cake(str(bugs), "--statistics", "--select", "CK3", "--ignore", "CK302"))
    assert sync == {c for c in everything if c.startswith("CK3")} - {"CK302"}
    assert _codes(_cake(str(bugs), "--statistics", "--select", "CK302", "--ignore", "CK3")) \
        == {"CK302"}
    both = _codes(_cake(str(bugs), "--statistics", "--select", "CK20,CK21",
                        "--extend-select", "CK404"))
    assert both == {c for c in everything if c.startswith("CK2")} | {"CK404"}
    bad = _cake(str(bugs), "--select", "CK99")
    assert bad.exit_code == 2 and "unknown rule selector 'CK99'" in bad.output


def test_fix_fixes_only_the_selected_codes(bugs: Path) -> None:
    r = _cake(str(bugs), "--fix", "--select", "CK306", "-q")
    assert r.exit_code == 0 and r.stdout == ""
    after = {d.code for f in bugs.iterdir()
             for d in check_source(SourceFile.read(f)).diagnostics}
    assert "CK306" not in after and {"CK302", "CK404"} <= after


def test_exit_zero_reports_but_succeeds() -> None:
    r = _cake(str(STAGES), "--exit-zero")
    assert r.exit_code == 0 and "error[CK201]" in r.stdout


def test_statistics_counts_per_code_and_marks_the_safely_fixable(bugs: Path) -> None:
    r = _cake(str(bugs / "smem_overflow_stages.cake"), str(bugs / "smem_overflow_sm80.cake"),
              str(bugs / WGMMA.name), "--statistics")
    assert r.exit_code == 1
    assert r.stdout == ("2  CK201      smem-overflow\n"
                        "1  CK306  [*] wgmma-not-waited\n"
                        "error: 3 errors in 3 files\n")


def test_quiet_prints_the_summary_or_nothing() -> None:
    r = _cake(str(STAGES), "-q")
    assert r.exit_code == 1 and r.stdout == "error: 1 error in 1 file\n"
    r = _cake(str(CLEAN), "--quiet")
    assert r.exit_code == 0 and r.stdout == ""


def test_stdin_with_a_filename() -> None:
    r = _cake("-", "--stdin-filename", "kernels/k.cake", input=STAGES.read_text())
    assert r.exit_code == 1 and "--> kernels/k.cake:" in r.stdout
    r = _cake("-", "--fix", input=WGMMA.read_text())
    assert r.exit_code == 0
    assert "wgmma_wait(0)" in r.stdout and "fixed 1 finding" in r.stderr
    assert check_source(SourceFile(r.stdout)).diagnostics == []
    assert _cake("-", str(STAGES), input="").exit_code == 2
    assert _cake(str(STAGES), "--stdin-filename", "k.cake").exit_code == 2


def test_unused_suppressions_are_fixed_away(tmp_path: Path) -> None:
    text = WGMMA.read_text()
    lines = text.split("\n")
    lines[2] += "  # cake: ignore[CK306]"
    kernel = tmp_path / "k.cake"
    kernel.write_text("\n".join(lines))
    r = _cake(str(kernel))
    assert r.exit_code == 1 and "warning[CK006]" in r.stdout and "error[CK306]" in r.stdout
    r = _cake(str(kernel), "--fix")
    assert r.exit_code == 0, r.output
    assert "cake: ignore" not in kernel.read_text() and "wgmma_wait(0)" in kernel.read_text()


@pytest.fixture
def project(bugs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`bugs` as the working directory, with the plugins loaded again from its config."""
    monkeypatch.chdir(bugs)
    monkeypatch.setattr(check_module, "_DEFAULT_PLUGINS", None)
    yield bugs
    monkeypatch.setattr(check_module, "_DEFAULT_PLUGINS", None)


def test_config_select_and_ignore_and_the_command_line_over_them(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.cake]\nselect = ["CK3"]\nignore = ["CK30"]\nextend-select = ["CK404"]\n')
    codes = _codes(_cake(".", "--statistics"))
    assert codes and all(c.startswith("CK31") or c == "CK404" for c in codes)
    assert "CK312" in codes
    # --ignore adds to the configured ignore; --select replaces select and ignore
    assert "CK312" not in _codes(_cake(".", "--statistics", "--ignore", "CK312"))
    assert _codes(_cake(".", "--statistics", "--select", "CK302")) == {"CK302"}


def test_config_ignore_hides_like_disable(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.cake]\nignore = ["CK306"]\n')
    ignored = _cake(".", "--statistics").stdout
    check_module._DEFAULT_PLUGINS = None
    (project / "pyproject.toml").write_text('[tool.cake]\ndisable = ["CK306"]\n')
    assert _cake(".", "--statistics").stdout == ignored and "CK306" not in ignored


def test_config_selector_that_matches_nothing_is_a_warning(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.cake]\nignore = ["CK3O2"]\n')
    r = _cake(WGMMA.name, "-q")
    assert "warning: " in r.stderr and "selector 'CK3O2' matches no code" in r.stderr


def test_config_fix_applies_the_safe_fixes_and_no_fix_overrides_it(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.cake]\nfix = true\n')
    before = WGMMA.read_text()
    kept = _cake(WGMMA.name, "--no-fix")
    assert (project / WGMMA.name).read_text() == before and "fixed" not in kept.stdout
    safe, rest = _safe(WGMMA)
    r = _cake(WGMMA.name)
    noun = "finding" if len(safe) == 1 else "findings"
    assert safe and r.stdout.startswith(f"fixed {len(safe)} {noun}\n")
    after = check_source(SourceFile.read(project / WGMMA.name, WGMMA.name)).diagnostics
    assert [d.code for d in after] == rest


def test_config_unsafe_fixes_and_a_bad_value(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.cake]\nunsafe-fixes = true\n')
    with_unsafe = _cake(".", "--diff").stdout
    assert with_unsafe == _cake(".", "--diff", "--unsafe-fixes").stdout
    assert with_unsafe != _cake(".", "--diff", "--no-unsafe-fixes").stdout
    check_module._DEFAULT_PLUGINS = None
    (project / "pyproject.toml").write_text('[tool.cake]\nfix = "yes"\n')
    r = _cake(WGMMA.name, "-q")
    assert "tool.cake.fix must be true or false" in r.stderr
    assert (project / WGMMA.name).read_text() == WGMMA.read_text()
