"""Running `cake evolve`: set up a run (or pick one up again) and drive the graph.

A run lives in `<run-dir>/<run-id>/` (LangGraph's SQLite checkpoints, the best kernel,
the report, the dispatcher in portfolio mode) and in `<run-dir>/runs.sqlite` (the runs
store shared by all runs under that directory).  Every super-step of the graph is
checkpointed before the next one starts (`durability="sync"`), so after a crash or a
`kill -9`, `--resume RUN` continues from the last completed step: the interrupted node
runs again, and because its store writes are keyed and its model answers replayed,
nothing is lost or counted twice.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake_agents.bounds import RunBounds
from cake_agents.budget import Budget
from cake_agents.config import EvolveConfig
from cake_agents.context import AgentContext, SetupError, evaluation_job, load_task_info
from cake_agents.executor import Executor, InlineExecutor, PrefetchingExecutor, make_executor
from cake_agents.lsp_client import CakeLspClient, LspError
from cake_agents.models import CallLimits, ModelCaller, ModelClient, failure_tally
from cake_agents.names import run_folder
from cake_agents.progress import NullProgress, ProgressSink
from cake_agents.store import STORE_NAME, RunsStore, StoreDamaged, StoreError

CHECKPOINTS = "checkpoints.sqlite"
RECURSION_LIMIT = 1_000_000


@dataclass
class RunSummary:
    run_id: str
    run_dir: Path
    store_path: Path
    status: str
    stop_reason: str
    evals: int
    proposed: int
    best_hash: str
    best_score: float | None
    usage: dict[str, float] = field(default_factory=dict)
    report: Path | None = None
    seconds: float = 0.0
    winners: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0
    """What `cake evolve` exits with: 0 a finished run, 1 nothing usable came of it (the
    seed fails, or the model wrote no kernel that checks), 2 the endpoint refused the key,
    3 a bound stopped it."""
    model_failures: dict[str, int] = field(default_factory=dict)
    """Why model calls failed (error class or kind of unusable answer) -> how many."""

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "stop_reason": self.stop_reason,
                "evals": self.evals, "proposed": self.proposed, "best_hash": self.best_hash,
                "best_score": self.best_score, "usage": self.usage,
                "seconds": round(self.seconds, 2), "winners": self.winners,
                "exit_code": self.exit_code, "model_failures": self.model_failures}


class _Starter(threading.Thread):
    """Starts the language server in the background; `wait` re-raises its failure."""

    def __init__(self, lsp: CakeLspClient) -> None:
        super().__init__(name="cake-lsp-start", daemon=True)
        self.lsp = lsp
        self.error: LspError | None = None
        self.start()

    def run(self) -> None:
        try:
            self.lsp.start()
        except LspError as exc:
            self.error = exc

    def wait(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


def damaged_checkpoints(path: Path, run_id: str, problem: str) -> str:
    return (f"the checkpoints of run {run_id} ({path}) are damaged ({problem}): this run "
            "cannot be resumed; what it found so far stays in the runs store (`cake runs "
            "show`), and other runs are not affected")


def check_checkpoints(path: Path, run_id: str) -> None:
    """Refuse to resume from a damaged checkpoint file before anything else starts."""
    if not path.is_file():
        return
    try:
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreDamaged(damaged_checkpoints(path, run_id, str(exc))) from None
    problems = [str(r[0]) for r in rows if r[0] != "ok"]
    if problems:
        raise StoreDamaged(damaged_checkpoints(path, run_id, "; ".join(problems[:3])))


def new_run_id(task: str) -> str:
    return f"{task}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def _values(v: Any) -> dict[str, Any]:
    if isinstance(v, dict):
        return v
    return dict(vars(v)) if v is not None else {}


def evolve(config: EvolveConfig, *, resume: str | None = None,
           model: ModelClient | None = None, executor: Executor | None = None,
           lsp: CakeLspClient | None = None, use_lsp: bool = True,
           progress: ProgressSink | None = None, tactics: list[Any] | None = None,
           lab: Any = None, write_report: bool = True, on_start: Any = None) -> RunSummary:
    """Run (or resume) one evolution; returns where it is stored and what it found.

    Every dependency can be injected (a model client, an executor, a running language
    server, a tactic lab): the CLI passes none, tests and benchmarks pass their own.
    """
    t0 = time.monotonic()
    root = Path(config.run_dir)
    # a new run is checked before anything is created on disk: a typo in the task name
    # must not leave an empty runs directory behind
    info = None if resume else load_task_info(config)
    store = RunsStore(root / STORE_NAME)
    if resume:  # a run that cannot be resumed is told before anything starts
        try:
            run_id = store.find_run(resume)
            check_checkpoints(root / run_id / CHECKPOINTS, run_id)
        except StoreError as exc:
            store.close()
            if isinstance(exc, StoreDamaged):
                raise
            raise SetupError(str(exc)) from exc
    owned: list[Any] = []
    saver_conn: sqlite3.Connection | None = None
    # The language server takes seconds to come up: start it now, on the other core,
    # while this process loads the task, the plugins and LangGraph.
    starting: _Starter | None = None
    if lsp is None and use_lsp:
        lsp = CakeLspClient()
        owned.append(lsp)
        starting = _Starter(lsp)
    try:
        if resume:
            row = store.run(run_id)
            assert row is not None
            stored = EvolveConfig.from_json(row["config"])
            stored.run_dir = config.run_dir
            config = stored
        else:
            run_id = new_run_id(Path(config.task).stem)
        if info is None:
            info = load_task_info(config)
        if config.arm == "cuda":
            info, config = _cuda_arm(info, config, model)
        if executor is None:
            executor = make_executor(config.executor, workers=config.workers,
                                     timeout_s=config.eval_timeout_s)
            owned.append(executor)
            if not resume and not isinstance(executor, InlineExecutor):
                # the seed is evaluated first: its gates run in the workers while the
                # model client, the language server and the graph are set up
                executor = PrefetchingExecutor(executor)
                owned[-1] = executor
                executor.prefetch(evaluation_job(config, info, info.seed_hash,
                                                 info.seed_text, None))
        if model is None and config.model:
            model = make_client(config)
        if model is not None and config.budget_usd is not None and \
                model.price(1000, 1000) is None:
            raise SetupError(
                f"--budget-usd needs the price of {model.name}, which litellm does not "
                "know; give it with --price-per-mtok IN,OUT (dollars per million input and "
                "output tokens, e.g. --price-per-mtok 0.15,0.60)")
        if not resume:
            store.create_run(run_id, task=info.name, mode=config.mode, model=config.model,
                             seed_rng=config.seed_rng, config=config.to_json())
        if on_start is not None:
            on_start(run_id)
        from cake_agents.policy import make_policy
        from cake_agents.tactic_lab import TacticLab

        if tactics is None:
            from cake_core.plugins import load_config, load_plugins

            tactics = [t for _, t in load_plugins(load_config()).tactics()]
        # a lab may be shared by runs of one kernel (benchmarks): it only caches
        policy = make_policy(config.policy, lab or TacticLab(tactics, info.kernel, info.arch))
        caller = None
        if model is not None:
            caller = ModelCaller(model, Budget(config.budget_tokens, config.budget_usd,
                                               config.effective_evals),
                                 store, run_id, max_tokens=config.max_tokens,
                                 timeout_s=config.model_timeout_s,
                                 retries=config.model_retries,
                                 backoff_s=config.model_backoff_s,
                                 limits=CallLimits(config.max_calls_per_node,
                                                   config.max_calls_per_generation,
                                                   config.max_failures))
        problem = ""
        if lsp is not None:
            try:
                if starting is not None:
                    starting.wait()
                else:
                    lsp.start()
            except LspError as exc:
                problem, lsp = str(exc), None
        sink = progress or NullProgress()
        out_dir = run_folder(root, run_id)
        bounds = RunBounds(config.max_minutes, config.max_store_mb, out_dir / CHECKPOINTS,
                           root / STORE_NAME)
        ctx = AgentContext(config, info, store, run_id, executor, policy, lsp, caller, sink,
                           problem, bounds)
        if problem:
            ctx.emit("warning", message=f"{problem}; checking in-process")
        out_dir.mkdir(parents=True, exist_ok=True)
        from cake_agents.checkpoints import checkpoint_saver
        from cake_agents.graph import build_graph
        from cake_agents.state import EvolveState

        saver_conn = sqlite3.connect(out_dir / CHECKPOINTS, check_same_thread=False)
        graph = build_graph(ctx, checkpointer=checkpoint_saver(saver_conn))
        cfg: dict[str, Any] = {"configurable": {"thread_id": run_id},
                               "recursion_limit": RECURSION_LIMIT}
        try:
            snapshot = graph.get_state(cfg)
        except sqlite3.DatabaseError as exc:
            raise StoreDamaged(damaged_checkpoints(out_dir / CHECKPOINTS, run_id, str(exc))
                               ) from None
        started = bool(_values(snapshot.values))
        inp = None if started else EvolveState(
            run_id=run_id, baseline={"times": info.baseline, "floors": info.floors,
                                     "bottleneck": info.bottleneck})
        # Not `snapshot.next`: a process killed after a node's writes were saved but
        # before the next checkpoint was (inside that write) leaves a checkpoint whose
        # tasks have all written, so `next` is empty although the graph has not reached
        # its end.  A finished graph's last checkpoint has no tasks at all.
        if not started or snapshot.tasks:
            store.set_status(run_id, "running")
            try:
                for values in graph.stream(inp, cfg, stream_mode="values",
                                           durability="sync"):
                    sink.state(_values(values))
            except KeyboardInterrupt:
                store.set_status(run_id, "interrupted",
                                 stop_reason="interrupted; resume with --resume")
                raise
            except Exception as exc:
                store.set_status(run_id, "failed", stop_reason=f"{type(exc).__name__}: {exc}"
                                 "; resume with --resume once the cause is fixed")
                raise
        final = _values(graph.get_state(cfg).values)
        summary = _summary(run_id, root, store, final, time.monotonic() - t0,
                           model=model is not None)
        store.set_status(run_id, summary.status, stop_reason=summary.stop_reason,
                         summary=summary.to_json())
        if write_report:
            from cake_agents.report import write_report as write

            summary.report = write(store, run_id, out_dir / "report.html")
        return summary
    finally:
        if starting is not None:
            starting.join()
        if progress is not None:
            with contextlib.suppress(Exception):
                progress.close()
        for thing in reversed(owned):
            with contextlib.suppress(Exception):
                if isinstance(thing, CakeLspClient):
                    thing.stop()
                else:
                    thing.close()
        if saver_conn is not None:
            saver_conn.close()
        store.close()


def _cuda_arm(info: Any, config: EvolveConfig, model: ModelClient | None
              ) -> tuple[Any, EvolveConfig]:
    """The `cuda` arm's task (the seed lowered to CUDA) and gates (`cuda_arm.py`)."""
    from dataclasses import replace

    from cake_agents import cuda_arm

    if not config.model and model is None:
        raise SetupError("the cuda arm has no offline policy: a model writes its CUDA "
                         "(give --model)")
    here = cuda_arm.availability()
    if not here.compile:
        raise SetupError(here.message)
    try:
        info = cuda_arm.seed_cuda(info)
    except ValueError as exc:
        raise SetupError(str(exc)) from exc
    # an answer must hold the whole .cu (the lowered seed is some 40 kB): the room for it
    # is charged to the same token budget as the cake arm's
    return info, replace(config, gates=cuda_arm.GATES,
                         max_tokens=max(config.max_tokens, len(info.seed_text) // 2))


def _summary(run_id: str, root: Path, store: RunsStore, final: dict[str, Any],
             seconds: float, *, model: bool = False) -> RunSummary:
    best = final.get("best", {}) or {}
    total = (final.get("usage", {}) or {}).get("total", {})
    halt = final.get("halt", {}) or {}
    evals = int(final.get("evals", 0))
    # a model run whose every answer failed or never checked clean made nothing usable
    written = [e for e in (final.get("population", {}) or {}).values()
               if e.get("tactic") == "model"]
    useless = bool(total.get("calls")) and not any(e.get("failed_gate") != "check"
                                                    for e in written)
    reason = str(halt.get("reason") or final.get("stop_reason", ""))
    # a model run whose budget could not pay for its first call asked the model nothing
    unasked = model and not total.get("calls") and "budget" in reason
    code = int(halt.get("exit", 3)) if halt else \
        1 if (best.get("hash", "") == "" and evals > 0) or useless or unasked else 0
    if useless and not halt:
        reason = f"{reason}; the model wrote no kernel that checks"
    elif unasked and not halt:
        reason = f"{reason}: the budget cannot pay for one model call (raise it)"
    return RunSummary(run_id, root / run_id, root / STORE_NAME,
                      "stopped" if halt else "finished", reason, evals,
                      int(final.get("proposed", 0)), best.get("hash", ""),
                      best.get("score"), {k: float(v) for k, v in total.items()},
                      seconds=seconds, winners=dict(final.get("winners", {}) or {}),
                      exit_code=code, model_failures=failure_tally(store, run_id))


def make_client(config: EvolveConfig) -> ModelClient:
    """The litellm client `--model`, `--api-base`, `--price-per-mtok` and `--no-stream`
    describe (the endpoint's key comes from the provider's environment variable)."""
    from cake_agents.models import LiteLLMClient

    kwargs: dict[str, Any] = {}
    if config.api_base:
        kwargs["api_base"] = config.api_base
    price = None
    if config.price_per_mtok is not None:
        price = (config.price_per_mtok[0] / 1e6, config.price_per_mtok[1] / 1e6)
    return LiteLLMClient(str(config.model), completion_kwargs=kwargs, price_per_token=price,
                         stream=config.stream)
