"""The server's handling of the cycle collector (`cake_lsp/heap.py`), in process."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from lsp_support import GEMM

from cake_core.plugins import load_plugins
from cake_lsp import heap
from cake_lsp.documents import CheckOptions, OpenDocument
from cake_lsp.guard import PassGuard


@pytest.fixture
def thawed() -> Iterator[None]:
    """Whatever a test freezes is unfrozen again (the freeze is process-wide)."""
    gc.collect()
    try:
        yield
    finally:
        gc.unfreeze()


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_each_check_joins_the_frozen_heap_and_a_sweep_reclaims_cycles(thawed: None) -> None:
    h = heap.Heap({})
    h.started()
    frozen = gc.get_freeze_count()
    garbage = _Cyclic()
    alive = weakref.ref(garbage)
    h.checked()
    assert gc.get_freeze_count() > frozen
    del garbage
    gc.collect()
    assert alive() is not None  # frozen: the collector no longer looks at it
    h.idle()
    assert alive() is None and h.sweeps == 1
    h.idle()  # nothing checked since: no second sweep
    assert h.sweeps == 1


def test_a_long_session_sweeps_even_without_idle_moments(
        thawed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "SWEEP_EVERY", 5)
    h = heap.Heap({})
    for _ in range(12):
        h.checked()
    assert h.sweeps == 2


def test_the_collector_can_be_left_alone(thawed: None) -> None:
    h = heap.Heap({heap.ENV: "default"})
    frozen = gc.get_freeze_count()
    h.started()
    h.checked()
    h.idle()
    assert gc.get_freeze_count() == frozen and h.sweeps == 0 and not h.enabled


def test_checks_make_little_cyclic_garbage() -> None:
    """Freezing after each check is cheap only because a check leaves almost nothing
    for the collector: reference counting frees the AST, IR and findings it replaces."""
    plugins = load_plugins(include_installed=False)
    kernel_passes, passes = PassGuard.from_plugins(plugins, {}).split(frozenset())
    options = CheckOptions(None, plugins, passes, 0, kernel_passes)
    doc = OpenDocument("file:///g.cake", GEMM, 1)
    doc.analyze(GEMM, options)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        alive = len(gc.get_objects())
        for i in range(10):
            text = GEMM.replace("regs=40", f"regs={40 - 8 * (i % 3)}")
            assert doc.analyze(text, options).program is not None
        found = gc.collect()
    finally:
        if was:
            gc.enable()
    assert found < alive // 50
