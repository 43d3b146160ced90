"""Bounds on a run as a whole: wall clock and the size of what it writes to disk.

The model caller bounds the calls (`models.CallLimits`), the checker the repair rounds;
these are the bounds no single node can see.  They are checked before every node but the
finalizer runs (`graph.build_graph`), so a run that reaches one stops at the next node
boundary, still writes its best kernel, and is recorded as `stopped: <why>`.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

MB = 1024 * 1024


def file_bytes(path: Path) -> int:
    """A SQLite database's size with its write-ahead log and journal."""
    total = 0
    for suffix in ("", "-wal", "-journal"):
        with contextlib.suppress(OSError):
            total += path.with_name(path.name + suffix).stat().st_size
    return total


@dataclass
class RunBounds:
    max_minutes: float | None
    max_store_mb: float | None
    checkpoints: Path
    """This run's checkpoint database."""
    runs_store: Path
    """The runs store shared by the runs of the directory: only its growth is counted."""
    started: float = field(default_factory=time.monotonic)
    store_base: int = -1

    def __post_init__(self) -> None:
        if self.store_base < 0:
            self.store_base = file_bytes(self.runs_store)

    def written_bytes(self) -> int:
        """What this run has written: its checkpoints and its rows of the runs store."""
        return file_bytes(self.checkpoints) + max(0, file_bytes(self.runs_store) -
                                                  self.store_base)

    def exceeded(self) -> str:
        """Why the run must stop now, or ""."""
        if self.max_minutes is not None:
            minutes = (time.monotonic() - self.started) / 60
            if minutes >= self.max_minutes:
                return (f"wall-clock limit: {minutes:.1f} minutes "
                        f"(--max-minutes {self.max_minutes:g})")
        if self.max_store_mb is not None:
            size = self.written_bytes()
            if size >= self.max_store_mb * MB:
                return (f"store-size limit: this run wrote {size / MB:.1f} MB "
                        f"(--max-store-mb {self.max_store_mb:g})")
        return ""
