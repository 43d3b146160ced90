"""Running one plugin pass so that nothing it does can take CAKE down with it.

Both the command line (`loader.run_rule`) and the language server (`cake_lsp.guard`) run
every rule that is not CAKE's own through `run_guarded`: an exception, a result that is
not a list of diagnostics, or an overrun becomes a reason to disable the rule, never a
crash.

The time limit is on the CPU time of the pass's thread, not the wall clock, so a loaded
machine (a CI runner, an editor busy elsewhere) does not disable a healthy pass; a pass
that sleeps or blocks is stopped after `WALL_FACTOR` times its limit of wall-clock time.
A runaway pass cannot be killed from outside in Python: the guard raises an exception
inside its thread (`PyThreadState_SetAsyncExc`), which stops pure-Python loops at their
next bytecode.  A pass stuck inside a C call keeps its (daemon) thread until the call
returns, but its result is ignored.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections.abc import Callable

from cake_core.diagnostics.model import Diagnostic

WALL_FACTOR = 10.0
_POLL_S = 0.05

Check = Callable[..., object]
"""A rule's check: (program, source) -> findings."""


class _Abandoned(BaseException):
    """Raised inside a pass's thread to stop it (BaseException: a pass's own
    `except Exception` cannot swallow it)."""


def run_guarded(fn: Check, program: object, source: object,
                limit: float) -> tuple[list[Diagnostic], str | None]:
    """(findings, None), or ([], why the pass must be disabled), e.g. "raised KeyError: 'x'".

    An infinite `limit` runs the pass on the caller's thread (CAKE's own passes); an
    `IsolatedCheck` (a third-party plugin's rule) runs in the isolated worker."""
    from cake_core.plugins.sandbox import IsolatedCheck

    if isinstance(fn, IsolatedCheck):
        return fn.run(source, limit)
    box: dict[str, object] = {}
    if math.isinf(limit):
        try:
            box["result"] = fn(program, source)
        except Exception as exc:
            box["error"] = exc
    elif not _run_limited(fn, program, source, limit, box):
        return [], f"ran longer than {limit:g} s"
    if "error" in box:
        error = box["error"]
        return [], f"raised {type(error).__name__}: {error}"
    result = box.get("result")
    if not isinstance(result, list | tuple) or \
            not all(isinstance(d, Diagnostic) for d in result):
        return [], f"returned {type(result).__name__}, not a list of diagnostics"
    return list(result), None


def _run_limited(fn: Check, program: object, source: object, limit: float,
                 box: dict[str, object]) -> bool:
    """Run `fn` on a thread of its own; False if it used more than `limit` CPU seconds
    (or `WALL_FACTOR` times that in wall-clock time) and was stopped."""

    def target() -> None:
        box["clock"] = time.pthread_getcpuclockid(threading.get_ident()) \
            if hasattr(time, "pthread_getcpuclockid") else None
        try:
            box["result"] = fn(program, source)
        except _Abandoned:
            pass
        except BaseException as exc:
            box["error"] = exc
        box["cpu"] = time.thread_time()

    thread = threading.Thread(target=target, name="cake-plugin-pass", daemon=True)
    started = time.perf_counter()
    thread.start()
    thread.join(limit)
    while thread.is_alive():
        if _cpu_time(box) > limit or time.perf_counter() - started > limit * WALL_FACTOR:
            _interrupt(thread)
            return False
        thread.join(_POLL_S)
    cpu_used = box.get("cpu")
    return not (isinstance(cpu_used, float) and cpu_used > limit)


def _cpu_time(box: dict[str, object]) -> float:
    """CPU seconds used so far by the pass's thread (infinite where the platform cannot
    tell, which leaves the wall clock as the limit)."""
    if "clock" not in box:
        return 0.0  # not scheduled yet: it has used nothing
    clock = box["clock"]
    if not isinstance(clock, int):
        return math.inf
    try:
        return time.clock_gettime(clock)
    except OSError:  # the thread ended meanwhile
        return 0.0


def _interrupt(thread: threading.Thread) -> None:
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(_Abandoned))


__all__ = ["WALL_FACTOR", "run_guarded"]
