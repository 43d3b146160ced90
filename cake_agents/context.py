"""What the nodes depend on, gathered in one object the graph factory closes over.

`TaskInfo` is the task as the search sees it: the seed kernel, the GPU shapes and their
buckets, and the seed's predicted time per shape (the baseline every speedup divides).
`AgentContext` adds the services: runs store, executor, language-server client, model
caller, offline policy and progress sink.  None of it is graph state: it is rebuilt
identically when a run resumes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cake_agents.config import EvolveConfig
from cake_agents.records import Candidate
from cake_agents.scoring import Bucket, ShapeSpec, make_buckets, shape_specs
from cake_agents.testhook import pause_point
from cake_core.source import display_path

if TYPE_CHECKING:
    from cake_agents.bounds import RunBounds
    from cake_agents.executor import Executor
    from cake_agents.lsp_client import CakeLspClient
    from cake_agents.models import ModelCaller
    from cake_agents.policy import Policy
    from cake_agents.progress import ProgressSink
    from cake_agents.store import RunsStore


class SetupError(Exception):
    """The run cannot start: unknown task, unreadable or broken seed kernel, ..."""


def content_hash(text: str) -> str:
    """Candidates are identified by their text (line endings and trailing space aside)."""
    norm = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n"))
    return hashlib.sha256(norm.strip().encode("utf-8")).hexdigest()[:16]


@dataclass
class TaskInfo:
    task: Any
    task_path: str
    seed_text: str
    seed_path: str
    kernel: str
    entry: int | None
    """Index of the seed's entry in `task.kernels` (None: a seed the task does not list)."""
    shapes: list[ShapeSpec]
    buckets: list[Bucket]
    baseline: dict[str, float] = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)
    bottleneck: dict[str, str] = field(default_factory=dict)
    arch: str = ""
    """The seed's target: candidates must keep it (a port to another GPU is not a faster
    kernel for this one, whatever the cost model says about the newer chip)."""
    cake_seed_text: str = ""
    """The `cuda` arm: the .cake seed its CUDA seed (`seed_text`) was lowered from."""

    @property
    def name(self) -> str:
        return str(self.task.name)

    @property
    def seed_hash(self) -> str:
        return content_hash(self.seed_text)

    def shapes_of(self, bucket: str | None) -> list[ShapeSpec]:
        return [s for s in self.shapes if bucket is None or s.bucket == bucket]


def load_task_info(config: EvolveConfig) -> TaskInfo:
    """Load the task and the seed kernel, and price the seed on every shape."""
    from cake_core.tasks import TaskError, load_task

    try:
        task = load_task(config.task)
    except TaskError as exc:
        raise SetupError(str(exc)) from exc
    entry_index: int | None
    if config.seed_kernel:
        path_text, _, kname = config.seed_kernel.partition("::")
        path = Path(path_text)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SetupError(f"cannot read the seed kernel {path}: {exc.strerror}") from exc
        entry = task.entry(kname, path) if kname else None
        entry_index = task.kernels.index(entry) if entry is not None else None
        kernel = kname or _only_kernel(text, str(path))
        if entry_index is None:
            hit = task.entry(kernel)
            entry_index = task.kernels.index(hit) if hit is not None else None
        seed_path = path.as_posix()
    else:
        if not task.kernels:
            raise SetupError(f"task {task.name} lists no kernel to start from; give --seed")
        entry = task.kernels[0]
        entry_index = 0
        try:
            text = entry.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SetupError(f"cannot read the task's kernel {entry.path}") from exc
        kernel = entry.kernel
        seed_path = display_path(entry.path)
    entry_obj = task.kernels[entry_index] if entry_index is not None else None
    raw = task.shapes_for(entry_obj, sim=False)
    shapes = shape_specs((s.dims, s.weight, s.label) for s in raw)
    info = TaskInfo(task, str(task.path), text, seed_path, kernel, entry_index, shapes,
                    make_buckets(shapes))
    _price_seed(info)
    return info


def _only_kernel(text: str, path: str) -> str:
    from cake_core.check import check_text

    res = check_text(text, path)
    if res.program is None or not res.program.kernels:
        raise SetupError(f"{path} defines no kernel that parses")
    names = [k.name for k in res.program.kernels]
    if len(names) != 1:
        raise SetupError(f"{path} defines {len(names)} kernels ({', '.join(names)}); "
                         "name one as FILE::KERNEL")
    return names[0]


def _price_seed(info: TaskInfo) -> None:
    from cake_core.check import check_text

    res = check_text(info.seed_text, info.seed_path)
    if res.errors or res.program is None:
        first = res.errors[0] if res.errors else None
        why = f": {first.code} {first.message} (line {first.span.start.line + 1})" \
            if first else ""
        raise SetupError(f"the seed kernel {info.seed_path} does not check{why}")
    kernel = next((k for k in res.program.kernels if k.name == info.kernel), None)
    if kernel is None:
        raise SetupError(f"{info.seed_path} has no kernel `{info.kernel}`")
    info.arch = kernel.arch
    try:
        from cake_core.cost.model import predict
    except ImportError:
        return
    for s in info.shapes:
        try:
            p = predict(kernel, s.dims)
        except Exception:
            continue
        info.baseline[s.key] = p.seconds
        info.floors[s.key] = p.roofline_seconds
        info.bottleneck[s.key] = p.bottleneck


@dataclass
class AgentContext:
    config: EvolveConfig
    info: TaskInfo
    store: RunsStore
    run_id: str
    executor: Executor
    policy: Policy
    lsp: CakeLspClient | None = None
    caller: ModelCaller | None = None
    progress: ProgressSink | None = None
    lsp_problem: str = ""
    """Why the language server is not used (it could not start); empty when it is."""
    bounds: RunBounds | None = None
    """Wall clock and store size (None: unbounded, as in node tests)."""

    @property
    def mode(self) -> str:
        return self.config.mode

    def emit(self, kind: str, **data: Any) -> None:
        # the fault tests stop the process at named events (see testhook.py)
        pause_point(f"{kind}:{data.get('gate') or data.get('name')}"
                    if kind in ("gate", "node") else kind)
        if self.progress is not None:
            self.progress.event(kind, **data)

    def text_of(self, hash_: str) -> str | None:
        if hash_ == self.info.seed_hash:
            return self.info.seed_text
        return self.store.candidate_text(self.run_id, hash_)

    def target_shapes(self, bucket: str | None) -> list[ShapeSpec]:
        """The shapes a candidate must cover: the focus bucket's in portfolio mode."""
        return self.info.shapes_of(bucket if self.mode == "portfolio" else None)

    def eval_job(self, cand: Candidate, bucket: str | None,
                 best: float | None = None) -> dict[str, Any]:
        """The evaluation job of one candidate (plain data: it crosses process bounds).

        `best` is the score to beat for the emulate and GPU gates (None: always run them)."""
        return evaluation_job(self.config, self.info, cand["hash"], cand["text"], bucket,
                              best)


def evaluation_job(config: EvolveConfig, info: TaskInfo, hash_: str, text: str,
                   bucket: str | None, best: float | None = None) -> dict[str, Any]:
    """The job `AgentContext.eval_job` sends; a function of the run's settings alone, so the
    seed's job can be sent before the rest of the run is set up (`run.evolve`)."""
    target = info.shapes_of(bucket if config.mode == "portfolio" else None)
    return {"hash": hash_, "text": text, "path": f"{hash_}.cake",
            "task_path": info.task_path, "kernel": info.kernel,
            "entry": info.entry, "arch": info.arch,
            "shapes": [{"key": s.key, "dims": s.dims} for s in info.shapes],
            "require_shapes": [s.key for s in target],
            "sim": {"schedules": config.sim_schedules, "seed": config.seed_rng},
            "gates": list(config.gates),
            "score": {"baseline": info.baseline, "floors": info.floors,
                      "shapes": [[s.key, s.weight] for s in target]},
            "emulate": {"mode": config.emulate, "seed": config.seed_rng,
                        "better_than": best},
            "gpu": {**config.extra.get("gpu", {}), "better_than": best},
            "cake_seed": info.cake_seed_text}
