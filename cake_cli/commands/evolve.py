"""`cake evolve TASK`: evolve a kernel for a task with the agent graph (`cake_agents`).

The compiler never imports the agents: this module imports `cake_agents` only when the
command runs, and `cake_agents` imports LangGraph (and litellm, only with `--model`)
only then.

Exit status: 0 the run finished (whether or not it improved the seed), 1 the run could
not make progress (the seed fails its gates and nothing repaired it, or the model wrote no
kernel that checks), 2 usage problems (unknown task, unreadable seed, unknown run to
resume, a dollar budget without a price), the model endpoint refused the key, or an
internal error, 3 a bound stopped the run (calls, failures in a row, wall clock, store
size, an unreachable endpoint): its status is then `stopped: <why>`, 130 interrupted
(Ctrl-C; the command to resume the run is printed).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cake_cli.args import GATES, parse_gates

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.

if TYPE_CHECKING:  # never imported at run time: the agents load only when the command runs
    from cake_agents.config import EvolveConfig
    from cake_agents.progress import ProgressSink
    from cake_agents.run import RunSummary


@click.command(name="evolve")
@click.argument("task", required=False)
@click.option("--mode", type=click.Choice(["clean", "reference", "portfolio"]), default=None,
              help="clean: start from the task's kernel; reference: from --seed; "
                   "portfolio: a winner per shape bucket plus a dispatcher. "
                   "[default: clean, or reference with --seed]")
@click.option("--seed", "seed_kernel", metavar="KERNEL",
              help="Start from this .cake file (FILE or FILE::KERNEL).")
@click.option("--model", metavar="M",
              help="A litellm model string (e.g. openai/gpt-4o); keys come from the "
                   "environment. Without it, the offline tactic search runs.")
@click.option("--budget-tokens", type=click.IntRange(1), help="Most model tokens to use.")
@click.option("--budget-usd", type=click.FloatRange(0, min_open=True),
              help="Most dollars to spend on the model.")
@click.option("--budget-evals", type=click.IntRange(1),
              help="Most candidates to evaluate (default 40 offline, 24 with a model).")
@click.option("--run-dir", type=click.Path(file_okay=False), default="cake-runs",
              show_default=True, help="Where runs are stored.")
@click.option("--resume", "resume", metavar="RUN",
              help="Continue RUN (an id, a unique prefix, or `latest`) where it stopped.")
@click.option("--seed-rng", type=int, default=0, show_default=True,
              help="Seed of the search's random choices (same seed, same search).")
@click.option("--batch", type=click.IntRange(1, 16), default=None,
              help="Candidates per generation (default 2 offline, 1 with a model).")
@click.option("--executor", type=click.Choice(["local", "inline", "ray"]), default="local",
              show_default=True, help="Where evaluations run: a local process pool, this "
                                      "process, or a Ray cluster (extra `ray`).")
@click.option("--workers", type=click.IntRange(0, 64), default=2, show_default=True,
              help="Worker processes of the local pool.")
@click.option("--gates", default="static,sim,cost,ptxas,emulate,gpu", show_default=True,
              help="Evaluation gates to run, in order (static and cost always run: the "
                   "search ranks kernels by predicted time).")
@click.option("--emulate/--no-emulate", "emulate", default=None,
              help="Run the lowered CUDA of each kept kernel on the CPU (the emulate gate). "
                   "[default: only where there is no GPU and there is a host C++ compiler]")
@click.option("--api-base", metavar="URL", envvar="CAKE_API_BASE",
              help="Base URL of the model's endpoint, e.g. an OpenAI-compatible server "
                   "(--model openai/NAME --api-base http://127.0.0.1:8000/v1); also "
                   "CAKE_API_BASE.")
@click.option("--price-per-mtok", metavar="IN,OUT",
              help="Dollars per million input and output tokens, for a model whose price "
                   "litellm does not know (needed by --budget-usd).")
@click.option("--stream/--no-stream", default=True, show_default=True,
              help="Read replies as they are generated and stop at the budget.")
@click.option("--max-repairs", type=click.IntRange(0, 20), default=2, show_default=True,
              help="Repair rounds per candidate (and per generation).")
@click.option("--max-calls-per-node", type=click.IntRange(1), default=12, show_default=True,
              help="Model calls one agent may make in one generation; more stops the run.")
@click.option("--max-calls-per-generation", type=click.IntRange(1), default=32,
              show_default=True, help="Model calls in one generation; more stops the run.")
@click.option("--max-failures", type=click.IntRange(1), default=8, show_default=True,
              help="Model calls in a row without a usable answer before the run stops.")
@click.option("--model-retries", type=click.IntRange(0, 10), default=3, show_default=True,
              help="Retries of a call after a transient error (rate limit, timeout, "
                   "connection); an endpoint still unreachable after them stops the run.")
@click.option("--max-minutes", type=click.FloatRange(0, min_open=True), default=120.0,
              show_default=True, help="Wall clock of the run; past it the run stops.")
@click.option("--max-store-mb", type=click.FloatRange(0, min_open=True), default=1024.0,
              show_default=True, help="What the run may write (checkpoints and its rows of "
                                      "the runs store); past it the run stops.")
@click.option("--arm", type=click.Choice(["cake", "cuda"]), default="cake", show_default=True,
              help="cake: the model writes CAKE IR; cuda: it writes CUDA C++ directly, "
                   "gated by nvcc and (with a GPU) the GPU runner only. Needs --model.")
@click.option("--quiet", "-q", is_flag=True, help="No live progress; only the summary.")
def evolve(task: str | None, mode: str | None, seed_kernel: str | None, model: str | None,
           budget_tokens: int | None, budget_usd: float | None, budget_evals: int | None,
           run_dir: str, resume: str | None, seed_rng: int, batch: int | None,
           executor: str, workers: int, gates: str, emulate: bool | None, api_base: str | None,
           price_per_mtok: str | None, stream: bool, max_repairs: int,
           max_calls_per_node: int, max_calls_per_generation: int, max_failures: int,
           model_retries: int, max_minutes: float, max_store_mb: float, arm: str,
           quiet: bool) -> None:
    """Evolve a kernel for TASK (a task name or a task file) under a budget.

    Agents (planner, coder, checker, repairer, evaluator, archivist, reflector) read the
    diagnostics of `cake lsp`, run the simulator and the cost model, and keep the best
    kernels.  With no --model an offline search over the installed tactics drives the
    same graph: no API key and no GPU needed.
    """
    if task is None and resume is None:
        raise click.UsageError("give a TASK, or --resume RUN")
    if arm == "cuda" and not model and resume is None:
        raise click.UsageError("the cuda arm has no offline policy: a model writes its CUDA "
                               "(give --model)")
    if mode == "reference" and not seed_kernel:
        raise click.UsageError("--mode reference needs --seed KERNEL")
    chosen_gates = parse_gates(gates)
    if emulate is not None:
        chosen_gates = [g for g in chosen_gates if g != "emulate"] + (["emulate"] if emulate
                                                                      else [])
    chosen_gates = [g for g in GATES if g in chosen_gates or g in ("static", "cost")]
    price = _price(price_per_mtok)
    if seed_kernel and not Path(seed_kernel.partition("::")[0]).is_file():
        raise click.UsageError(f"no such seed kernel file: {seed_kernel.partition('::')[0]}")
    try:
        from cake_agents.config import EvolveConfig
        from cake_agents.context import SetupError
        from cake_agents.run import evolve as run_evolve
    except ImportError as exc:
        raise click.ClickException(
            f"the agents are not available ({exc}); install langgraph and "
            "langgraph-checkpoint-sqlite (and litellm for --model)") from exc
    chosen: Any = mode or ("reference" if seed_kernel else "clean")  # checked by click.Choice
    config = EvolveConfig(
        task=task or "", mode=chosen,
        seed_kernel=seed_kernel, model=model, budget_tokens=budget_tokens,
        budget_usd=budget_usd, budget_evals=budget_evals, run_dir=run_dir,
        seed_rng=seed_rng, batch=batch or 0, executor=executor, workers=workers,
        gates=tuple(chosen_gates), emulate="on" if emulate else "auto", api_base=api_base,
        price_per_mtok=price, stream=stream, max_repairs=max_repairs,
        max_calls_per_node=max_calls_per_node,
        max_calls_per_generation=max_calls_per_generation, max_failures=max_failures,
        model_retries=model_retries, max_minutes=max_minutes, max_store_mb=max_store_mb,
        arm=arm)
    if arm == "cuda":
        from cake_agents.cuda_arm import availability

        click.echo(f"cake evolve: the cuda arm: {availability().message}", err=True)
    elif "emulate" in chosen_gates:
        _note_emulate(config.emulate)
    progress = _Progress(config, quiet)
    try:
        summary = run_evolve(config, resume=resume, progress=progress.sink,
                             on_start=progress.start)
    except SetupError as exc:
        raise click.UsageError(str(exc)) from exc
    except KeyboardInterrupt:
        # Ctrl-C: the run is checkpointed after every step; say how to pick it up again
        flag = f" --run-dir {run_dir}" if str(run_dir) != "cake-runs" else ""
        if progress.run_id:
            click.echo(f"\ninterrupted; resume with: cake evolve --resume "
                       f"{progress.run_id}{flag}", err=True)
        else:
            click.echo("\ninterrupted before the run was created", err=True)
        sys.exit(130)
    _print_summary(summary, config)
    code = summary.exit_code
    if code == 1 and config.arm == "cuda" and summary.best_hash == "":
        code = 0  # without a GPU the cuda arm compiles only: nothing gets a score
    if code:
        sys.exit(code)


def _price(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise click.UsageError(f"--price-per-mtok takes IN,OUT (two numbers, dollars per "
                               f"million tokens), not {text!r}") from None
    if a < 0 or b < 0:
        raise click.UsageError("--price-per-mtok: prices cannot be negative")
    return a, b


def _note_emulate(mode: str) -> None:
    """Say once, not per candidate, why a wanted emulate gate cannot run here."""
    from cake_agents.gates import emulate_availability

    avail = emulate_availability(mode)
    if avail.notable:
        click.echo(f"cake evolve: the emulate gate is off: {avail.reason}", err=True)


class _Progress:
    """Chooses the display once the run id is known (the panel shows it)."""

    def __init__(self, config: EvolveConfig, quiet: bool) -> None:
        from cake_agents.progress import LineProgress, NullProgress

        self.config = config
        self.run_id = ""
        self.sink: ProgressSink
        if quiet:
            self.sink = NullProgress()
        elif not sys.stdout.isatty():
            self.sink = LineProgress()
        else:
            self.sink = _Deferred()

    def start(self, run_id: str) -> None:
        self.run_id = run_id
        if isinstance(self.sink, _Deferred):
            from cake_agents.progress import RichProgress

            c = self.config
            self.sink.inner = RichProgress(
                run_id=run_id, task=c.task, mode=c.mode, model=c.model,
                budget={"evals": c.effective_evals, "tokens": c.budget_tokens,
                        "usd": c.budget_usd})


class _Deferred:
    """Forwards to the live panel once it exists."""

    def __init__(self) -> None:
        self.inner: ProgressSink | None = None

    def event(self, kind: str, **data: Any) -> None:
        if self.inner is not None:
            self.inner.event(kind, **data)

    def state(self, values: dict[str, Any]) -> None:
        if self.inner is not None:
            self.inner.state(values)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def _print_summary(s: RunSummary, config: EvolveConfig) -> None:
    flag = f" --run-dir {config.run_dir}" if str(config.run_dir) != "cake-runs" else ""
    status = "stopped: " if s.status == "stopped" else ""
    click.echo(f"run {s.run_id}: {status}{s.stop_reason or 'finished'}")
    click.echo(f"  {s.evals} evaluations, {s.proposed} candidates, {s.seconds:.0f} s")
    if s.best_score is not None:
        click.echo(f"  best predicted speedup over the seed: {s.best_score:.3f}x "
                   f"(kernel {s.best_hash[:10]})")
    if s.usage.get("calls"):
        tokens = int(s.usage.get("tokens_in", 0) + s.usage.get("tokens_out", 0))
        failed = sum(s.model_failures.values())
        why = ", ".join(f"{n} {k}" for k, n in sorted(s.model_failures.items()))
        usd = f"${s.usage.get('usd', 0.0):.4f}" if config.budget_usd is not None or \
            s.usage.get("usd") else "price unknown"
        click.echo(f"  model: {int(s.usage['calls'])} calls ({failed} failed), {tokens} "
                   f"tokens, {usd}")
        if why:
            click.echo(f"  model failures: {why}")
    if s.winners and config.mode == "portfolio":
        click.echo(f"  portfolio: {len(s.winners)} bucket winners; dispatcher in "
                   f"{s.run_dir / 'dispatch.hpp'} and dispatch.json")
    click.echo(f"stored in {s.run_dir} (runs store {s.store_path})")
    if s.report is not None:
        click.echo(f"report: {s.report.resolve().as_uri()}")
    click.echo(f"  cake runs show {s.run_id}{flag}")
    click.echo(f"  cake runs report {s.run_id}{flag}")
