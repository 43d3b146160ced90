"""What a run is asked to do: the options of `cake evolve`, stored with the run.

A resumed run reads its configuration back from the runs store, so it goes on exactly as
it started (same task, mode, seed kernel, budgets, RNG seed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Mode = Literal["clean", "reference", "portfolio"]
MODES: tuple[Mode, ...] = ("clean", "reference", "portfolio")
DEFAULT_RUN_DIR = Path("cake-runs")
DEFAULT_EVALS_OFFLINE = 40
DEFAULT_EVALS_MODEL = 24


@dataclass
class EvolveConfig:
    task: str
    """A task name (shipped, or in ./examples/tasks/) or a path to a task file."""
    mode: Mode = "clean"
    seed_kernel: str | None = None
    """`--seed KERNEL`: a .cake file (optionally `file.cake::kernel`), reference mode."""
    model: str | None = None
    """A litellm provider string; None drives the graph with the offline policy."""
    budget_tokens: int | None = None
    budget_usd: float | None = None
    budget_evals: int | None = None
    run_dir: str = str(DEFAULT_RUN_DIR)
    seed_rng: int = 0
    batch: int = 0
    """Candidates per generation (0: 2 offline, 1 with a model)."""
    max_repairs: int = 2
    """Repair rounds a candidate gets after the language server finds errors (and rounds
    per generation: a candidate the repairer gave up on comes back unchanged)."""
    patience: int = 6
    """Generations without improvement before the offline search stops."""
    executor: str = "local"
    workers: int = 2
    eval_timeout_s: float = 120.0
    sim_schedules: int = 2
    gates: tuple[str, ...] = ("static", "sim", "cost", "ptxas", "emulate", "gpu")
    emulate: str = "auto"
    """The emulate gate: `auto` (where there is no GPU and there is a host C++ compiler),
    `on` (also beside a GPU) or `off`."""
    max_tokens: int = 4096
    model_timeout_s: float = 120.0
    model_retries: int = 3
    model_backoff_s: float = 2.0
    """First wait after a transient model error (doubling, with jitter)."""
    max_calls_per_node: int = 12
    """Model calls (attempts) one node may make in one generation."""
    max_calls_per_generation: int = 32
    """Model calls all nodes together may make in one generation."""
    max_failures: int = 8
    """Model calls in a row that gave nothing usable before the run stops."""
    max_minutes: float | None = 120.0
    """Wall clock of one session of the run (a resumed run starts a new one)."""
    max_store_mb: float | None = 1024.0
    """What the run may write: its checkpoints plus its rows in the runs store."""
    api_base: str | None = None
    """Base URL of an OpenAI-compatible endpoint (`--api-base`, or `CAKE_API_BASE`)."""
    price_per_mtok: tuple[float, float] | None = None
    """Dollars per million input and output tokens, when litellm does not know the price."""
    stream: bool = True
    """Read completions as they are generated, and stop reading at the budget."""
    policy: str = "evolve"
    """Offline policy: `evolve` (cost-model guided), `greedy` (the same without lookahead:
    one tactic move per candidate) or `random` (the baseline in bench/)."""
    arm: str = "cake"
    """`cake`: the model writes CAKE IR; `cuda`: it writes CUDA C++ directly, gated by nvcc
    and the GPU runner only (`cuda_arm.py`, the controlled experiment)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def effective_batch(self) -> int:
        return self.batch or (1 if self.model else 2)

    @property
    def effective_evals(self) -> int:
        if self.budget_evals is not None:
            return self.budget_evals
        return DEFAULT_EVALS_MODEL if self.model else DEFAULT_EVALS_OFFLINE

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gates"] = list(self.gates)
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EvolveConfig:
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        if "gates" in kwargs:
            kwargs["gates"] = tuple(kwargs["gates"])
        if kwargs.get("price_per_mtok") is not None:
            kwargs["price_per_mtok"] = tuple(kwargs["price_per_mtok"])
        return cls(**kwargs)
