"""Cycle-collector settings for CAKE's long-lived processes (language server, `cake evolve`).

A check allocates tens of thousands of small objects (AST nodes, spans, IR values) and
frees them all by reference counting: the IR builders break their own reference cycles,
so a check leaves no cyclic garbage (tests/test_gc_policy.py holds that).  The cycle
collector then has nothing to find, yet with CPython's default threshold (700 net
allocations) it runs dozens of times per check, and each oldest-generation pass walks the
whole heap: the import graph, the primitive registry, every open document.  Those passes
are what put a check's p95 latency at about 1.5x its median.

`settle()` is called once a process has loaded what it keeps for its lifetime: it moves
everything alive into the permanent generation (`gc.freeze`, the usual practice of
long-lived Python servers) and raises the youngest generation's threshold, so the
collector runs every few checks instead of many times in each.  Collection still
happens: any cycle a plugin creates is reclaimed, only later.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
"""Net container allocations between young collections (CPython's default is 700)."""


def settle() -> None:
    """Freeze what is alive now and make young collections rarer (idempotent)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
