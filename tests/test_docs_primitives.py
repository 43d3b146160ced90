"""docs/primitives.md is generated from the registry; a stale page is a failing test.

The page is what people and agents read to learn the primitives, so it must never
disagree with the type rules and effects the compiler actually uses.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from cake_core.primitives.registry import builtin_registry

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_primitives", DOCS / "gen_primitives.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_primitives_page_is_up_to_date() -> None:
    expected = _generator().render()
    actual = (DOCS / "primitives.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/primitives.md is stale: run python docs/gen_primitives.py"


def test_every_primitive_has_a_section_with_its_doc() -> None:
    page = (DOCS / "primitives.md").read_text(encoding="utf-8")
    for prim in builtin_registry().all():
        assert f"### `{prim.signature}`" in page, prim.key
        assert prim.summary in page, prim.key


def test_sections_name_the_features_and_archs() -> None:
    page = _generator().render()
    wgmma = page.split("### `wgmma(acc, a, b, accumulate=True)`", 1)[1].split("### ", 1)[0]
    assert "`wgmma` (sm_90a)" in wgmma
    assert "asynchronous, completes through the `wgmma` mechanism" in wgmma
    tma = page.split("### `tma_load(dst, src, bar, multicast=0)`", 1)[1].split("### ", 1)[0]
    assert "arrives on `bar` with transaction bytes" in tma


def test_check_mode_reports_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _generator()
    stale = tmp_path / "primitives.md"
    stale.write_text("# out of date\n", encoding="utf-8")
    monkeypatch.setattr(gen, "OUTPUT", stale)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == gen.render()
