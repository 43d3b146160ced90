"""Where candidates are evaluated: in-process, a local process pool, or a Ray cluster.

Evaluation runs kernels through the simulator, which can take long on a bad candidate
(a huge loop, a deadlock explored to its bound).  So the default is a pool of worker
processes, each job with a deadline: a worker that overruns is killed and replaced, and
the candidate fails with a `timeout` finding at the gate it was in.  Workers report the
gate they enter, which the live progress shows.

`RayExecutor` fans the same jobs out over an existing Ray cluster (`--executor ray`,
`ray.init(address=...)`); the job function is the same `gates.evaluate_job`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from cake_agents.context import SetupError
from cake_agents.gates import evaluate_job

GateCallback = Callable[[str, str], None]
"""(candidate hash, gate) as a worker enters a gate."""


class Executor(Protocol):
    name: str

    def run(self, jobs: Sequence[dict[str, Any]], on_gate: GateCallback | None = None
            ) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


def failed_result(hash_: str, gate: str, code: str, message: str) -> dict[str, Any]:
    """The result of a job that did not finish (timeout, crashed worker)."""
    finding = {"code": code, "severity": "error", "line": 0, "col": 0, "message": message,
               "line_text": ""}
    return {"hash": hash_, "status": "fail", "failed_gate": gate,
            "gates": {gate: {"status": "fail", "seconds": 0.0, "detail": {},
                             "findings": [finding]}},
            "times": {}, "floors": {}, "bottlenecks": {}, "admitted": []}


class InlineExecutor:
    """Evaluates in the calling process: no isolation, no start-up cost (tests, bench)."""

    name = "inline"

    def run(self, jobs: Sequence[dict[str, Any]], on_gate: GateCallback | None = None
            ) -> list[dict[str, Any]]:
        out = []
        for job in jobs:
            h = job["hash"]
            report = (lambda g, h=h: on_gate(h, g)) if on_gate is not None else None
            out.append(evaluate_job(job, report))
        return out

    def close(self) -> None:
        pass


# --- local process pool ------------------------------------------------------------------
def _worker_main(conn: Connection) -> None:
    """A worker: warm the compiler's imports, then evaluate jobs until the pipe closes."""
    with contextlib.suppress(Exception):
        import cake_core.check
        import cake_core.cost.model
        import cake_core.sim.tasks_run  # noqa: F401
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        h: str = job["hash"]

        def report(gate: str, h: str = h) -> None:
            conn.send(("gate", h, gate))

        result = evaluate_job(job, report)
        conn.send(("done", h, result))


@dataclass
class _Worker:
    process: Any
    conn: Connection
    job: dict[str, Any] | None = None
    index: int = -1
    started: float = 0.0
    gate: str = "static"


@dataclass
class LocalPoolExecutor:
    """`workers` processes (spawned, so nothing of the parent's threads is inherited)."""

    workers: int = 2
    timeout_s: float = 120.0
    name: str = "local"
    _pool: list[_Worker] = field(default_factory=list)
    _closed: bool = False
    """Set by `close`: a job still running in another thread (a prefetch) then ends as a
    failure instead of spawning workers that nothing would close."""

    def _spawn(self) -> _Worker:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker_main, args=(child,), daemon=True,
                        name="cake-evolve-worker")
        p.start()
        child.close()
        return _Worker(p, parent)

    def _kill(self, w: _Worker) -> None:
        with contextlib.suppress(Exception):
            w.process.kill()
            w.process.join(timeout=5)
        with contextlib.suppress(Exception):
            w.conn.close()
        if w in self._pool:
            self._pool.remove(w)

    def run(self, jobs: Sequence[dict[str, Any]], on_gate: GateCallback | None = None
            ) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(jobs)
        pending = list(enumerate(jobs))
        while len(self._pool) < min(self.workers, len(jobs)) and not self._closed:
            self._pool.append(self._spawn())
        while pending or any(w.job is not None for w in self._pool):
            if self._closed:
                for i, job in pending + [(w.index, w.job) for w in self._pool
                                         if w.job is not None]:
                    results[i] = failed_result(job["hash"], "static", "E-WORKER",
                                               "the executor was closed")
                for w in list(self._pool):  # spawned while `close` ran
                    self._kill(w)
                break
            for w in list(self._pool):
                if w.job is None and pending:
                    w.index, w.job = pending.pop(0)
                    w.started, w.gate = time.monotonic(), "static"
                    try:
                        w.conn.send(w.job)
                    except (OSError, BrokenPipeError):
                        results[w.index] = failed_result(w.job["hash"], "static", "E-WORKER",
                                                         "the evaluation worker died")
                        self._kill(w)
                        self._pool.append(self._spawn())
            busy = [w for w in self._pool if w.job is not None]
            if not busy:
                continue
            now = time.monotonic()
            deadline = min(w.started + self.timeout_s for w in busy)
            ready = wait([w.conn for w in busy], timeout=max(0.0, deadline - now))
            for w in busy:
                if w.conn in ready:
                    try:
                        kind, h, payload = w.conn.recv()
                    except (EOFError, OSError):
                        assert w.job is not None
                        results[w.index] = failed_result(
                            w.job["hash"], w.gate, "E-WORKER",
                            f"the evaluation worker died in the {w.gate} gate")
                        self._kill(w)
                        if not self._closed:
                            self._pool.append(self._spawn())
                        continue
                    if kind == "gate":
                        w.gate = payload
                        if on_gate is not None:
                            on_gate(h, payload)
                    else:
                        results[w.index] = payload
                        w.job = None
                elif time.monotonic() - w.started >= self.timeout_s:
                    assert w.job is not None
                    results[w.index] = failed_result(
                        w.job["hash"], w.gate, "E-TIMEOUT",
                        f"evaluation exceeded {self.timeout_s:g} s in the {w.gate} gate")
                    self._kill(w)
                    self._pool.append(self._spawn())
        return [r for r in results if r is not None]

    def close(self) -> None:
        self._closed = True
        for w in list(self._pool):
            with contextlib.suppress(Exception):
                w.conn.close()
            with contextlib.suppress(Exception):
                w.process.join(timeout=2)
            if w.process.is_alive():
                self._kill(w)
        self._pool.clear()


# --- Ray ---------------------------------------------------------------------------------
#: Attempts per job on Ray: a worker that dies mid-evaluation (killed, out of memory, its
#: node lost) gets its job run once more on another worker; a second death is reported as
#: an `E-WORKER` failure of that candidate, like a dead worker of the local pool.
RAY_ATTEMPTS = 2

#: Set before Ray is imported when this process starts a Ray instance of its own: Ray's
#: servers then bind to the loopback interface only (Ray binds them to the node's address,
#: and this makes that address 127.0.0.1), and no usage statistics leave the machine.
PRIVATE_RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


class RayUnavailable(SetupError):
    """`--executor ray` without Ray installed, or a Ray that would not start: a usage
    problem the command line reports in one line, not a traceback."""


def _ray_evaluate(job: dict[str, Any]) -> dict[str, Any]:
    return evaluate_job(job)


class RayExecutor:
    """Jobs as Ray tasks.

    `address` joins an existing cluster (`ray://...`, `HOST:PORT` or `auto`; `RAY_ADDRESS`
    when not given).  Without one, a private Ray instance starts on this machine with
    `num_cpus` workers, bound to the loopback interface, with neither dashboard nor usage
    statistics, and `close` shuts it down (Ray removed its in-process "local mode", so a
    one-machine instance is the local way to run it).  `evaluate` is the job function,
    `gates.evaluate_job` unless a test stands in for it.
    """

    name = "ray"

    def __init__(self, address: str | None = None, *, timeout_s: float = 120.0,
                 num_cpus: int | None = None,
                 evaluate: Callable[[dict[str, Any]], dict[str, Any]] = _ray_evaluate
                 ) -> None:
        address = address or os.environ.get("RAY_ADDRESS") or None
        if address is None:
            for key, value in PRIVATE_RAY_ENV.items():
                os.environ.setdefault(key, value)
        try:
            import ray
        except ImportError as exc:
            raise RayUnavailable("--executor ray needs Ray: pip install "
                                 "'cake-kernels[ray]'") from exc

        if address is None:
            # Ray read the environment when it was first imported, maybe before this
            with contextlib.suppress(Exception):
                ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
        self._ray = ray
        self._owned = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "configure_logging": False}
            if address is None:
                kwargs.update(address="local", num_cpus=num_cpus,
                              _node_ip_address="127.0.0.1")
            else:
                kwargs["address"] = address
            try:
                ray.init(**kwargs)
            except Exception as exc:
                where = "start Ray on this machine" if address is None else \
                    f"join the Ray cluster at {address}"
                raise RayUnavailable(f"could not {where}: {type(exc).__name__}: {exc}"
                                     ) from exc
            self._owned = True
        self._remote = ray.remote(max_retries=RAY_ATTEMPTS - 1, retry_exceptions=False)(
            evaluate)
        self.timeout_s = timeout_s

    def run(self, jobs: Sequence[dict[str, Any]], on_gate: GateCallback | None = None
            ) -> list[dict[str, Any]]:
        ray = self._ray
        refs = [self._remote.remote(dict(j)) for j in jobs]
        out = []
        deadline = time.monotonic() + self.timeout_s
        for job, ref in zip(jobs, refs, strict=True):
            gate = (job.get("gates") or ["static"])[0]
            try:
                out.append(ray.get(ref, timeout=max(0.1, deadline - time.monotonic())))
            except ray.exceptions.GetTimeoutError:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
                out.append(failed_result(job["hash"], gate, "E-TIMEOUT",
                                         f"evaluation exceeded {self.timeout_s:g} s on Ray"))
            except Exception as exc:  # a lost worker or node, a task Ray could not run
                dead = isinstance(exc, ray.exceptions.WorkerCrashedError |
                                  ray.exceptions.NodeDiedError)
                why = (f"the evaluation worker died {RAY_ATTEMPTS} times (retried once)"
                       if dead else f"ray task failed: {type(exc).__name__}")
                first = str(exc).strip().splitlines()[:1]
                out.append(failed_result(job["hash"], gate, "E-WORKER",
                                         f"{why}: {first[0] if first else ''}".rstrip(": ")))
        return out

    def close(self) -> None:
        if self._owned:
            self._owned = False
            with contextlib.suppress(Exception):
                self._ray.shutdown()


class CachingExecutor:
    """Remembers results by candidate hash across runs (benchmarks re-meet kernels)."""

    def __init__(self, inner: Executor, cache: dict[str, dict[str, Any]] | None = None
                 ) -> None:
        self.inner = inner
        self.cache = {} if cache is None else cache
        self.name = f"cached-{inner.name}"

    def run(self, jobs: Sequence[dict[str, Any]], on_gate: GateCallback | None = None
            ) -> list[dict[str, Any]]:
        todo = [j for j in jobs if j["hash"] not in self.cache]
        for r in self.inner.run(todo, on_gate):
            self.cache[r["hash"]] = r
        return [self.cache[j["hash"]] for j in jobs]

    def close(self) -> None:
        self.inner.close()


class PrefetchingExecutor:
    """Starts one job before anyone asks for it, and hands its result over when asked.

    A run's first evaluation is the seed's, and the seed is known before the model client
    (litellm takes seconds to import), the language server and the graph are ready: its
    gates (the emulation's compile and run among them) proceed in the workers meanwhile.
    A job is handed over only if it is asked for exactly as it was sent."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.name = inner.name
        self._job: dict[str, Any] | None = None
        self._result: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None

    def prefetch(self, job: dict[str, Any]) -> None:
        def work() -> None:
            # a failure here is met again, and reported, when the job is asked for
            with contextlib.suppress(Exception):
                self._result = self.inner.run([job])[0]

        self._job, self._result = job, None
        self._thread = threading.Thread(target=work, name="cake-evolve-prefetch",
                                        daemon=True)
        self._thread.start()

    def run(self, jobs: Sequence[dict[str, Any]], on_gate: GateCallback | None = None
            ) -> list[dict[str, Any]]:
        got: dict[str, Any] | None = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            if self._result is not None and self._job in jobs:
                got = self._result
                if on_gate is not None:
                    for gate in got.get("gates", {}):
                        on_gate(got["hash"], gate)
        todo = [j for j in jobs if got is None or j != self._job]
        fresh = iter(self.inner.run(todo, on_gate) if todo else [])
        out = [got if got is not None and j == self._job else next(fresh) for j in jobs]
        if got is not None:
            self._job = self._result = None
        return out

    def close(self) -> None:
        self.inner.close()  # a prefetch still running ends as a failure nobody reads
        if self._thread is not None:
            self._thread.join(timeout=60)


def make_executor(kind: str, *, workers: int = 2, timeout_s: float = 120.0,
                  address: str | None = None) -> Executor:
    if kind == "inline" or (kind == "local" and workers <= 0):
        return InlineExecutor()
    if kind == "local":
        return LocalPoolExecutor(workers=workers, timeout_s=timeout_s)
    if kind == "ray":
        return RayExecutor(address, timeout_s=timeout_s, num_cpus=max(1, workers))
    raise ValueError(f"unknown executor {kind!r} (local, inline, ray)")
