"""`cake experiment TASK --arms cake,cuda`: the controlled experiment of the agents.

Runs `cake evolve` for each arm (`cake`: the model writes CAKE IR; `cuda`: it writes CUDA
C++ directly) with the same model and budgets, `--repeats` times each, and prints one
table (the median over the repeats) as Markdown; `--json` writes the table and every run.
It exits 0 once every run has ended (a run that found nothing is a figure too), and 2 at
the first run the endpoint refuses the key (every later run would be refused as well).
See cake_agents/experiment.py for the figures and docs/agents.md for the design.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cake_cli.args import GATES, parse_gates


@click.command(name="experiment")
@click.argument("task")
@click.option("--arms", default="cake,cuda", show_default=True,
              help="Comma-separated arms: cake, cuda.")
@click.option("--repeats", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Runs per arm (the table gives their median).")
@click.option("--model", metavar="M", help="A litellm model string; required by the cuda arm.")
@click.option("--budget-tokens", type=click.IntRange(1), help="Most model tokens per run.")
@click.option("--budget-usd", type=click.FloatRange(0, min_open=True),
              help="Most dollars per run.")
@click.option("--budget-evals", type=click.IntRange(1), help="Most evaluations per run.")
@click.option("--seed-rng", type=int, default=0, show_default=True,
              help="RNG seed of the first repeat (the next ones: +1, +2, ...).")
@click.option("--run-dir", type=click.Path(file_okay=False), default="cake-runs",
              show_default=True, help="Where the runs are stored.")
@click.option("--gates", default="static,sim,cost,ptxas,emulate,gpu", show_default=True,
              help="The cake arm's gates (as `cake evolve --gates`); the cuda arm's are "
                   "nvcc and the GPU runner.")
@click.option("--batch", type=click.IntRange(1, 16), default=None,
              help="Candidates per generation (default 1 with a model).")
@click.option("--executor", type=click.Choice(["local", "inline", "ray"]), default="local",
              show_default=True, help="Where evaluations run (as `cake evolve --executor`).")
@click.option("--api-base", metavar="URL", envvar="CAKE_API_BASE",
              help="The model endpoint's base URL (an OpenAI-compatible server; "
                   "env CAKE_API_BASE).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              default="experiment.json", show_default=True,
              help="Where to write the table and every run as JSON.")
def experiment(task: str, arms: str, repeats: int, model: str | None,
               budget_tokens: int | None, budget_usd: float | None,
               budget_evals: int | None, seed_rng: int, run_dir: str, gates: str,
               batch: int | None, executor: str, api_base: str | None,
               json_path: str) -> None:
    """Run TASK through each arm under the same model and budgets; print the table."""
    chosen = [a.strip() for a in arms.split(",") if a.strip()]
    bad = [a for a in chosen if a not in ("cake", "cuda")]
    if bad or not chosen:
        raise click.UsageError(f"unknown arm(s) {', '.join(bad) or '(none)'}; "
                               "choose from cake, cuda")
    if "cuda" in chosen and not model:
        raise click.UsageError("the cuda arm has no offline policy: a model writes its CUDA "
                               "(give --model); run `--arms cake` for the offline search")
    chosen_gates = parse_gates(gates)
    chosen_gates = [g for g in GATES if g in chosen_gates or g in ("static", "cost")]
    from cake_agents.config import EvolveConfig
    from cake_agents.context import SetupError
    from cake_agents.experiment import ArmRun, markdown, run_experiment

    def said(r: ArmRun) -> None:
        click.echo(f"{r.arm} #{r.repeat + 1}: run {r.run_id}: {r.evals} evaluations, "
                   f"{r.tokens} tokens ({r.stop_reason})", err=True)

    config = EvolveConfig(task=task, model=model, budget_tokens=budget_tokens,
                          budget_usd=budget_usd, budget_evals=budget_evals, run_dir=run_dir,
                          seed_rng=seed_rng, gates=tuple(chosen_gates), batch=batch or 0,
                          executor=executor, api_base=api_base)
    try:
        result = run_experiment(config, chosen, repeats, on_run=said)
    except SetupError as exc:
        raise click.UsageError(str(exc)) from exc
    Path(json_path).write_text(json.dumps(result, indent=2), encoding="utf-8")
    click.echo(markdown(result), nl=False)
    click.echo(f"wrote {json_path}", err=True)
    if result.get("aborted"):
        click.echo(f"stopped: {result['aborted']}", err=True)
        sys.exit(2)
