"""Which process owns a running run, and whether that process is still there.

A run killed with `kill -9`, or cut short by a reboot, never gets to write its final
status: its row says `running` for ever.  So a run records its owner when it starts
(host, pid and an identity token) and readers ask whether that owner is still alive.

The pid alone is not enough: pids are reused, and after a reboot a new process may hold
the old number.  On Linux the token is the boot id and the process's start time in clock
ticks since boot (`/proc/<pid>/stat`), which together name one process for good.  Where
`/proc` is missing the token is empty and only the pid is checked.  A run owned by
another host cannot be checked from here: its liveness is unknown, not dead.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")


@dataclass(frozen=True)
class Owner:
    """The process that runs a run: where it runs, its pid, and its identity token."""

    host: str
    pid: int
    token: str

    def alive(self) -> bool | None:
        """True or False when it can be told from this host, None when it cannot."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return None
        if self.token:
            return _token(self.pid) == self.token
        return _pid_exists(self.pid)


def current_owner() -> Owner:
    """This process, as the owner of a run it is about to run."""
    return Owner(socket.gethostname(), os.getpid(), _token(os.getpid()))


def _token(pid: int) -> str:
    """`<boot id>:<start ticks>` of a live process; "" without /proc or for a dead one."""
    try:
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return ""
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    fields = stat[stat.rindex(")") + 2:].split()
    state, start_ticks = fields[0], fields[19]
    if state in ("Z", "X"):  # a zombie has exited; only its exit status is left
        return ""
    return f"{boot}:{start_ticks}"


def _pid_exists(pid: int) -> bool | None:
    if os.name != "posix":  # os.kill would terminate the process there, not probe it
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
