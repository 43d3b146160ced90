"""Property: the whole static gate (parse + IR build + type check + verifier) never
faults, whatever text it is given — every input yields diagnostics or a clean result.

A fault would surface as CK901 (check_source turns exceptions into it), so that is what
these properties forbid.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cake_core.check import check_source
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted((ROOT / "examples").glob("*.cake")) + sorted(
    (ROOT / "bench" / "data").glob("*.cake"))
SEED_TEXTS = [p.read_text(encoding="utf-8") for p in SEEDS]

# Fragments that make mutations land on interesting constructs, not only on noise.
TOKENS = ["(", ")", "[", "]", ":", ",", ".T", "=", " ", "\n", "\t", "    ", "smem", "fragment",
          "wgmma", "tma_load", "ab.wait()", "range(", "role(", "0", "128", "-1", "1e9",
          "swizzle(", "bf16", "f32", "s", "k", "block.x", "#", '"', "\\", "\r\n", "\x00",
          "é", "😀", "lambda", "while", "import os", "**", "//", "/", "cdiv(", "dim(", "T"]


def _no_fault(text: str) -> None:
    res = check_source(SourceFile(text, "fuzz.cake"))
    faults = [d for d in res.diagnostics if d.code == "CK901"]
    assert not faults, faults[0].message + "\n" + "\n".join(faults[0].notes)
    n = len(res.source.data)
    for d in res.diagnostics:
        assert 0 <= d.span.start.offset <= d.span.end.offset <= n


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEED_TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.sampled_from(TOKENS) | st.text(max_size=3))
        if kind == "insert":
            text = text[:pos] + piece + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 12)):]
        else:
            text = text[:pos] + piece + text[pos + len(piece):]
    return text


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_kernels_never_fault(text: str) -> None:
    _no_fault(text)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_many_more_mutated_kernels_never_fault(text: str) -> None:
    _no_fault(text)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=400))
def test_random_text_never_faults(text: str) -> None:
    _no_fault(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=60))
def test_token_soup_never_faults(tokens: list[str]) -> None:
    _no_fault("".join(tokens))


def test_deep_nesting_and_big_file() -> None:
    _no_fault("X = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    _no_fault("@kernel(arch='sm_90a', grid=(1,), warps=4)\ndef k():\n" + "    pass\n" * 100_000)
