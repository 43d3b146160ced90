"""How a run's LangGraph checkpoints are read back: data only, never code.

A checkpoint file sits in the run's folder, where anything that can write files can change
it, and `--resume` reads it.  LangGraph's default serializer can rebuild objects from it:
with its pickle fallback on it unpickles, and even without it, its msgpack decoder imports
any `module.name` a stored value names and calls it (it warns, and its authors plan to
block this).  The graph's state is plain JSON-like values (state.py), so nothing needs
either: the serializer here never unpickles and rebuilds only the few standard types
LangGraph lists as safe (dates, sets, its own `Send`, ...); any other named type is left
as the inert data it was stored with.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

from cake_agents.testhook import pause_point

#: Types of CAKE's own that a checkpoint may rebuild, beside LangGraph's safe list: the
#: graph's input (the first state of a run) is stored as an `EvolveState`, a dataclass of
#: plain values whose constructor does nothing else.
OWN_TYPES = (("cake_agents.state", "EvolveState"),)


def checkpoint_serde() -> Any:
    """LangGraph's serializer with pickle off and the msgpack types limited to its safe list
    and `OWN_TYPES`."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer(pickle_fallback=False, allowed_json_modules=None,
                              allowed_msgpack_modules=OWN_TYPES)


def checkpoint_saver(conn: sqlite3.Connection) -> Any:
    """The SQLite checkpointer of a run, reading with `checkpoint_serde`, with the fault
    tests' `checkpoint` pause point inside each write transaction (after the rows are
    written, before the commit)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class Saver(SqliteSaver):
        @contextlib.contextmanager
        def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
            with super().cursor(transaction) as cur:
                yield cur
                if transaction:
                    pause_point("checkpoint")

    return Saver(conn, serde=checkpoint_serde())
