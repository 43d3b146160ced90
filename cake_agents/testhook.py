"""A test hook: stop the process at a named point so that a test can `kill -9` it there.

The fault tests (`tests/agents/test_faults.py`) must kill a run at an exact point (while
an evaluation is in a gate, between two stored results, inside a checkpoint write).
Waiting for output and killing "soon after" would race with the run.  So with
`CAKE_TEST_PAUSE_AT=POINT` (or `POINT#N`, the N-th time the point is reached) the process
prints `cake-test-pause POINT#N pid P` on stderr when it gets there and sleeps until it is
killed.  Without the variable `pause_point` is one dictionary lookup.  This is for tests
only; nothing else sets the variable.

Points: `node:<name>` (a node starts), `gate:<name>` (an evaluation enters a gate),
`evaluated` (a candidate's result is stored, before the next one's), `checkpoint` (a
checkpoint write is in its transaction, before the commit).
"""

from __future__ import annotations

import os
import sys
import time

ENV = "CAKE_TEST_PAUSE_AT"
MARKER = "cake-test-pause"
_seen: dict[str, int] = {}


def pause_point(point: str) -> None:
    """Sleep for good here when `CAKE_TEST_PAUSE_AT` names this point (and count)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, nth = spec.partition("#")
    if name != point:
        return
    _seen[point] = _seen.get(point, 0) + 1
    if _seen[point] != (int(nth) if nth else 1):
        return
    print(f"{MARKER} {point}#{_seen[point]} pid {os.getpid()}", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)
