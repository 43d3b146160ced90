"""Hover over a `dim(...)` declaration states the facts the dim declares."""

from __future__ import annotations

from cake_core.check import check_source
from cake_core.ide.index import build_index
from cake_core.source import SourceFile
from cake_lsp.features.hover import describe

TEXT = '''N = dim("N", multiple_of=8, max=4096)
'''


def test_hover_on_a_dim_names_its_multiple_and_bound() -> None:
    src = SourceFile(TEXT, "dims.cake")
    result = check_source(src)
    assert result.parse is not None and result.parse.module is not None
    found = describe(build_index(result.parse.module, result.program), src, 0)
    assert found is not None
    text, span = found
    assert "multiple of 8" in text and "at most 4096" in text
    assert (span.start.offset, span.end.offset) == (0, 1)
