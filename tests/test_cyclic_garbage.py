"""A check leaves no cyclic garbage: everything it allocates is freed by reference counting.

This is what makes the language server's frozen heap (`cake_lsp/heap.py`: the collector
looks only at what the current check allocates) safe for memory: if a change reintroduces
a cycle (say a builder and its evaluator pointing at each other), every check's AST and IR
wait for a full sweep again.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cake_core.check import check_source
from cake_core.source import SourceFile
from cake_core.syntax.parser import parse, reparse

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.cake"))
BROKEN = "BM = 128\n@kernel(arch='sm_90a', grid=(1,), warps=4)\ndef k(A: Tensor[f32, (BM,)]):\n" \
    "    x = smem(f32, (BM,)\n    while True:\n        pass\n"


@contextmanager
def cyclic_garbage() -> Iterator[Counter[str]]:
    """Types of the objects that only the cycle collector could free, made inside."""
    found: Counter[str] = Counter()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.update(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_check_leaves_no_cycles(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    check_source(SourceFile(text, path.name))  # warm caches that live for the process
    with cyclic_garbage() as found:
        result = check_source(SourceFile(text, path.name))
        assert result.program is not None and result.program.kernels
        del result
    assert not found, f"a check left cyclic garbage: {found.most_common(8)}"


def test_broken_input_and_reparse_leave_no_cycles() -> None:
    check_source(SourceFile(BROKEN, "broken.cake"))
    with cyclic_garbage() as found:
        result = check_source(SourceFile(BROKEN, "broken.cake"))
        assert result.diagnostics
        first = parse(SourceFile(EXAMPLES[0].read_text(encoding="utf-8"), "a.cake"))
        again = reparse(first, 10, 10, " ")
        assert again.module.body
        del result, first, again
    assert not found, f"cyclic garbage: {found.most_common(8)}"


def test_a_deadlock_finding_leaves_no_cycles() -> None:
    """The deadlock pass groups waiting roles (Tarjan's components) on every finding.  The
    warm-up is another deadlocked kernel: verdicts are cached by kernel text."""
    bugs = Path(__file__).resolve().parent / "bugs"
    warm = SourceFile((bugs / "sync_syncthreads_in_role.cake").read_text(), "warm.cake")
    assert "CK311" in {d.code for d in check_source(warm).diagnostics}
    path = bugs / "sync_named_barrier_handoff_hang.cake"
    with cyclic_garbage() as found:
        result = check_source(SourceFile(path.read_text(encoding="utf-8"), path.name))
        assert "CK311" in {d.code for d in result.diagnostics}
        del result
    assert not found, f"cyclic garbage: {found.most_common(8)}"
