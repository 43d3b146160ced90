"""The CK6xx pages' examples are true: found by lowering or compiling, not by `cake check`.

Their pages start with `<!-- dynamic: found by the compiler -->`; the static docs test
checks their structure, this module their examples.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.lower import lower_source
from cake_core.lower.build import build_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.source import SourceFile

RULES = Path(__file__).resolve().parents[2] / "docs" / "rules"
MARKER = "<!-- dynamic: found by the compiler -->"
_SECTION = re.compile(r"^## (Example|Use instead)\n+```python\n(.*?)^```", re.M | re.S)
CODES = [f"CK60{i}" for i in range(1, 9)]


def blocks(code: str) -> dict[str, str]:
    return dict(_SECTION.findall((RULES / f"{code}.md").read_text(encoding="utf-8")))


@pytest.mark.parametrize("code", CODES)
def test_page_is_marked_dynamic_and_use_instead_checks_clean(code: str) -> None:
    text = (RULES / f"{code}.md").read_text(encoding="utf-8")
    assert text.splitlines()[0] == MARKER
    good = blocks(code)["Use instead"]
    assert check_text(good, f"{code}-use-instead.cake").diagnostics == []


def test_ck601_example_is_not_lowered_and_its_twin_is() -> None:
    b = blocks("CK601")
    bad = lower_source(SourceFile(b["Example"], "CK601-example.cake"))
    assert [d.code for d in bad.diagnostics] == ["CK601"]
    good = lower_source(SourceFile(b["Use instead"], "CK601-use-instead.cake"))
    assert good.diagnostics == [] and good.cu is not None


nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


@pytest.mark.nvcc
@nvcc
@pytest.mark.parametrize("code", ["CK603", "CK604"])
def test_compiled_examples_find_their_code(code: str, tmp_path: Path) -> None:
    b = blocks(code)
    bad = build_source(SourceFile(b["Example"], f"{code}-example.cake"), cache=tmp_path)
    assert code in {d.code for d in bad.diagnostics}
    good = build_source(SourceFile(b["Use instead"], f"{code}-use-instead.cake"), cache=tmp_path)
    assert code not in {d.code for d in good.diagnostics}
    assert good.ok
