"""Third-party plugin rules in a worker process with a memory limit and a wall-clock limit.

The thread guard (`guard.py`) stops a pure-Python loop, but nothing inside one process can
bound a rule that allocates without limit (one `[0] * 10**10` is a single C call that
takes the machine's memory before any check runs) or that is stuck inside a C call.  So the
rules of plugins installed from other distributions run in one long-lived worker process
per CAKE process (`cake check`, the language server), started on first use:

* the worker sets `RLIMIT_AS` to what it uses after loading the plugins plus
  `CAKE_PLUGIN_MEMORY_MB` (default 1024 MiB), so runaway allocation is a `MemoryError` in
  the worker, never pressure on the machine;
* inside the worker each rule still runs under the thread guard (its CPU-time limit);
* the parent waits at most `limit * WALL_FACTOR` plus a parse allowance for an answer,
  then kills the worker's process group and starts a fresh one for the next rule.

The worker receives the source text, builds the program itself (with every installed
plugin's primitives, as the parent does) and returns the rule's diagnostics.  Both ways
the messages are JSON (the diagnostics in CAKE's JSON report format), never pickle: the
worker runs third-party code, and what it sends must not be able to run code here.  CAKE's own
rules and the first-party plugins (entry points of CAKE's own distribution) run in
process: they are trusted, and the round trip would cost every check.  Set
`CAKE_PLUGIN_ISOLATION=0` to run every rule in process.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cake_core.diagnostics.json_format import DiagnosticsFormatError, from_json_obj, to_json_obj
from cake_core.diagnostics.model import Diagnostic

MEMORY_ENV = "CAKE_PLUGIN_MEMORY_MB"
ISOLATION_ENV = "CAKE_PLUGIN_ISOLATION"
DEFAULT_MEMORY_MB = 1024
START_ALLOWANCE_S = 60.0
"""The first request waits for the worker to import CAKE and load the plugins."""
PARSE_ALLOWANCE_S = 10.0
FIRST_PARTY = {"cake-kernels"}


def isolation_enabled() -> bool:
    return os.environ.get(ISOLATION_ENV, "1") != "0"


def memory_mb() -> int:
    try:
        return max(64, int(os.environ.get(MEMORY_ENV, DEFAULT_MEMORY_MB)))
    except ValueError:
        return DEFAULT_MEMORY_MB


@dataclass(frozen=True)
class IsolatedCheck:
    """A rule's check that runs in the worker: `run_guarded` dispatches on this type."""

    entry_point: str
    plugin: str
    rule: str

    def __call__(self, program: object, source: object) -> list[Diagnostic]:
        findings, reason = self.run(source, 1.0)
        if reason is not None:
            raise RuntimeError(reason)
        return findings

    def run(self, source: object, limit: float) -> tuple[list[Diagnostic], str | None]:
        text = getattr(source, "text", "")
        path = getattr(source, "path", "<input>")
        return _WORKER.request((self.entry_point, self.rule, text, path, limit), limit)


# --- framing -----------------------------------------------------------------------------------
def _send(fd: Any, obj: object) -> None:
    data = json.dumps(obj).encode()
    fd.write(struct.pack("<Q", len(data)) + data)
    fd.flush()


def _recv_exact(fd: Any, n: int) -> bytes:
    chunks = []
    while n:
        chunk = fd.read(n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(fd: Any) -> Any:
    (n,) = struct.unpack("<Q", _recv_exact(fd, 8))
    return json.loads(_recv_exact(fd, n))


# --- the parent's side -------------------------------------------------------------------------
class _Worker:
    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._answered = False
        """Whether the running worker has answered once (it has finished starting)."""
        self._lock = threading.Lock()
        self.started = 0
        """Workers started in this process (tests and benchmarks read it)."""

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "cake_core.plugins.sandbox", str(memory_mb())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True)
        self.started += 1
        self._answered = False
        return proc

    def prestart(self) -> None:
        """Start the worker now, so that its imports overlap the caller's own work."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._proc = self._start()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                f.close()

    def request(self, req: tuple[Any, ...], limit: float) -> tuple[list[Diagnostic], str | None]:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._proc = self._start()
            fresh = not self._answered
            proc = self._proc
            assert proc is not None and proc.stdin is not None and proc.stdout is not None
            deadline = time.monotonic() + limit * _wall_factor() + PARSE_ALLOWANCE_S + \
                (START_ALLOWANCE_S if fresh else 0.0)
            try:
                _send(proc.stdin, req)
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._kill()
                        return [], f"ran longer than {limit:g} s (its worker was stopped)"
                    ready, _, _ = select.select([proc.stdout], [], [], min(left, 0.5))
                    if ready:
                        break
                    if proc.poll() is not None:
                        raise EOFError
                status, payload = _recv(proc.stdout)
                self._answered = True
            except (EOFError, BrokenPipeError, OSError, ValueError):
                code = proc.poll()
                self._kill()
                return [], f"stopped its isolated worker (exit status {code})"
            if status == "ok":
                try:
                    return from_json_obj(payload), None
                except DiagnosticsFormatError as exc:
                    return [], f"answered with malformed findings ({exc})"
            return [], str(payload)

    def close(self) -> None:
        with self._lock:
            self._kill()


def _wall_factor() -> float:
    from cake_core.plugins.guard import WALL_FACTOR

    return WALL_FACTOR


_WORKER = _Worker()
atexit.register(_WORKER.close)


def worker_starts() -> int:
    """How many workers this process has started."""
    return _WORKER.started


def prestart() -> None:
    _WORKER.prestart()


def isolate(plugin: Any, entry_point: str) -> Any:
    """`plugin` with every rule's check replaced by an `IsolatedCheck`."""
    rules = tuple(replace(r, check=IsolatedCheck(entry_point, plugin.name, r.name))
                  for r in plugin.rules)
    return replace(plugin, rules=rules)


# --- the worker's side -------------------------------------------------------------------------
def _vm_bytes() -> int:
    try:
        with Path("/proc/self/status").open(encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _serve(budget_mb: int) -> None:  # pragma: no cover - runs in the worker process
    import resource

    from cake_core.check import check_text
    from cake_core.plugins.guard import run_guarded
    from cake_core.plugins.loader import load_plugins

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a plugin's print() must not corrupt the replies
    ps = load_plugins(isolate=False)
    base = load_plugins(include_installed=False)
    registry = ps.registry
    rules = {(ps.entry_points.get(p.name, p.name), r.name): (p, r)
             for p in ps.plugins for r in p.rules}
    limit_bytes = _vm_bytes() + budget_mb * (1 << 20)
    if limit_bytes > budget_mb * (1 << 20):
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    while True:
        try:
            entry_point, rule_name, text, path, limit = _recv(stdin)
        except EOFError:
            return
        found = rules.get((entry_point, rule_name))
        if found is None:
            _send(stdout, ("fail", f"is not installed in the worker ({entry_point})"))
            continue
        plugin, rule = found
        box: dict[str, Any] = {}

        def capture(program: object, source: object, rule: Any = rule,
                    limit: float = limit, box: dict[str, Any] = box) -> list[Diagnostic]:
            box["out"] = run_guarded(rule.check, program, source, limit)
            return []

        try:
            check_text(text, path, plugins=base, registry=registry, passes=[capture])
            findings, reason = box.get("out", ([], None))
        except MemoryError:
            findings, reason = [], "raised MemoryError"
        if reason is not None and reason.startswith("raised MemoryError"):
            reason = f"exceeded its memory limit ({budget_mb} MiB)"
        findings = [d if d.source != "cake" else replace(d, source=plugin.name)
                    for d in findings]
        try:
            _send(stdout, ("ok", to_json_obj(findings)) if reason is None else ("fail", reason))
        except MemoryError:
            _send(stdout, ("fail", f"exceeded its memory limit ({budget_mb} MiB)"))


if __name__ == "__main__":  # pragma: no cover - the worker process
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_MEMORY_MB)
