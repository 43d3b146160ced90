"""Property tests: whatever the input, `parse` returns and every range lies in the text.

About 2,400 generated cases in all, sized to run in well under a minute; the long-running
version of the same properties is `bench/fuzz_long.py`.
"""

from __future__ import annotations

from edit_support import Edit, apply_edit, edit_range, edits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cake_core.source import SourceFile
from cake_core.syntax.parser import ParseResult, parse, reparse

KERNEL = '''\
BM, BN, BK = 128, 128, 32
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=32)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (2, BM, BK), layout=swizzle(64))  # é 😀
    acc = fragment(f32, (BM, BN), layout=mma_acc)
    for k in range(cdiv(K, BK)):
        s = k % 2
        if k > 0 and s == 1:
            cp_async(sa[s], A.tile((BM, BK), (block.x, k)))
        else:
            acc += -acc[0:2, ::1] if s else 1.5e3
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, f16))
'''

PIECES = [*"()[]{}:,.=+-*/ \n\t\r\\'\"#@x0_é😀\x00", "for ", "if ", "else", "def ", "with ",
          "lambda ", "while ", "import ", "f'", '"""', "    ", "\r\n", "(" * 50, "]" * 3]

FUZZ = settings(max_examples=600, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check(result: ParseResult) -> None:
    """The properties every parse must have."""
    size = len(result.source.data)
    for diag in result.diagnostics:
        assert diag.code != "CK901", diag.message
        assert 0 <= diag.span.start.offset <= diag.span.end.offset <= size
        assert diag.span.start.line <= diag.span.end.line < result.source.line_count
        assert diag.path == result.source.path
        for fix in diag.fixes:
            for edit in fix.edits:
                assert 0 <= edit.span.start.offset <= edit.span.end.offset <= size
    offsets = [d.span.start.offset for d in result.diagnostics]
    assert offsets == sorted(offsets)
    body = result.module.body
    for stmt in body:
        assert 0 <= stmt.span.start.offset <= stmt.span.end.offset <= size


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    check(parse(SourceFile(text)))


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(raw: bytes) -> None:
    check(parse(SourceFile.from_bytes(raw)))


_edit = edits(PIECES, 6)


def mutate(text: str, drawn: list[Edit]) -> str:
    for edit in drawn:
        text = apply_edit(text, edit)
    return text


@FUZZ
@given(st.lists(_edit, min_size=1, max_size=6))
def test_mutated_kernel(drawn: list[Edit]) -> None:
    check(parse(SourceFile(mutate(KERNEL, drawn), "k.cake")))


_BASE = parse(SourceFile(KERNEL, "k.cake"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_edit, min_size=1, max_size=4))
def test_incremental_equals_full(drawn: list[Edit]) -> None:
    result = _BASE
    for edit in drawn:
        text = result.source.text
        i, j, new = edit_range(text, edit)
        start, end = len(text[:i].encode()), len(text[:j].encode())
        result = reparse(result, start, end, new)
        full = parse(SourceFile(text[:i] + new + text[j:], "k.cake"))
        assert result.source.text == full.source.text
        assert result.module == full.module
        assert result.diagnostics == full.diagnostics
        check(result)
