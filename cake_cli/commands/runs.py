"""`cake runs list | show RUN | best RUN | report RUN`: look at what `cake evolve` stored.

RUN is a run id, a unique prefix of one, or `latest`.  The runs store is
`<run-dir>/runs.sqlite` (default run dir: ./cake-runs).  Like `cake evolve`, these
commands import `cake_agents` only when they run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cake_cli.args import open_runs_store

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.

if TYPE_CHECKING:
    from cake_agents.store import RunsStore

_RUN_DIR = click.option("--run-dir", type=click.Path(file_okay=False), default="cake-runs",
                        show_default=True, help="Where runs are stored.")
_LIST_ROW = "{:<40} {:<16} {:<10} {:<12} {:>5} {:>8}  {:<16}  {}"
"""The columns of `runs list`, shared by its header and its rows so that they line up."""


def _find(store: RunsStore, ref: str) -> str:
    from cake_agents.store import StoreError

    try:
        return store.find_run(ref)
    except StoreError as exc:
        raise click.UsageError(str(exc)) from exc


def _speedup(x: Any) -> str:
    return f"{x:.3f}x" if isinstance(x, int | float) else "-"


@click.group(name="runs")
def runs() -> None:
    """List and inspect the runs of `cake evolve`."""


@runs.command(name="list")
@_RUN_DIR
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(run_dir: str, as_json: bool) -> None:
    """One line per run under a header: id, task, mode, status, evaluations, best speedup.

    A run whose process ended without finishing (killed, or the machine went down) shows
    as `interrupted`, not `running`.
    """
    store = open_runs_store(run_dir, "--run-dir")
    rows = store.list_runs()
    if as_json:
        click.echo(json.dumps([{k: r[k] for k in ("run_id", "task", "mode", "model", "status",
                                                   "stop_reason", "owner", "created",
                                                   "summary")}
                               for r in rows], indent=2))
        return
    if not rows:
        click.echo("no runs")
        return
    click.echo(_LIST_ROW.format("RUN", "TASK", "MODE", "STATUS", "EVALS", "BEST", "STARTED",
                                "MODEL").rstrip())
    for r in rows:
        s = r["summary"] or {}
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created"]))
        click.echo(_LIST_ROW.format(r["run_id"], r["task"], r["mode"], r["status"],
                                    s.get("evals", 0), _speedup(s.get("best_score")), when,
                                    r["model"] or "offline"))


@runs.command()
@click.argument("run")
@_RUN_DIR
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(run: str, run_dir: str, as_json: bool) -> None:
    """Configuration, budget use, best kernel, winners and failure classes of RUN."""
    store = open_runs_store(run_dir, "--run-dir")
    run_id = _find(store, run)
    r = store.run(run_id)
    assert r is not None
    s = r["summary"] or {}
    failures = store.failures(run_id)
    by_sig: dict[tuple[str, str, str], int] = {}
    for f in failures:
        key = (f["gate"], f["code"], f["construct"] or f["norm_message"])
        by_sig[key] = by_sig.get(key, 0) + 1
    if as_json:
        click.echo(json.dumps({"run": {k: r[k] for k in r if k != "config"},
                               "config": r["config"],
                               "failures": [{"gate": g, "code": c, "signature": x, "count": n}
                                            for (g, c, x), n in by_sig.items()]}, indent=2))
        return
    cfg = r["config"]
    click.echo(f"run      {run_id}")
    click.echo(f"task     {r['task']} ({r['mode']}), model {r['model'] or 'none (offline)'}, "
               f"seed rng {r['seed_rng']}")
    click.echo(f"status   {r['status']}" + (f": {r['stop_reason']}" if r["stop_reason"] else ""))
    if r["owner"]:
        click.echo(f"process  {r['owner']} (host:pid that ran it last)")
    click.echo(f"budgets  evaluations {cfg.get('budget_evals') or 'default'}, tokens "
               f"{cfg.get('budget_tokens') or '-'}, dollars {cfg.get('budget_usd') or '-'}")
    usage = s.get("usage", {})
    click.echo(f"used     {s.get('evals', 0)} evaluations, {s.get('proposed', 0)} candidates, "
               f"{int(usage.get('tokens_in', 0) + usage.get('tokens_out', 0))} tokens, "
               f"${usage.get('usd', 0.0):.4f}")
    click.echo(f"best     {_speedup(s.get('best_score'))} predicted, kernel "
               f"{(s.get('best_hash') or '-')[:10]}")
    for bucket, h in (s.get("winners") or {}).items():
        click.echo(f"  bucket {bucket}: {h[:10]}")
    if by_sig:
        click.echo("failures (count, gate, code, construct or message):")
        for (g, c, x), n in sorted(by_sig.items(), key=lambda kv: -kv[1])[:12]:
            click.echo(f"  {n:>3}  {g:<8} {c:<12} {x}")


@runs.command()
@click.argument("run")
@_RUN_DIR
@click.option("--bucket", help="Portfolio runs: the winner of this shape bucket.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write it here.")
def best(run: str, run_dir: str, bucket: str | None, output: str | None) -> None:
    """Print the best kernel of RUN (a .cake text)."""
    store = open_runs_store(run_dir, "--run-dir")
    run_id = _find(store, run)
    r = store.run(run_id)
    assert r is not None
    s = r["summary"] or {}
    h = (s.get("winners") or {}).get(bucket) if bucket else s.get("best_hash")
    if not h:
        raise click.UsageError(f"run {run_id} has no best kernel"
                               + (f" for bucket {bucket}" if bucket else "") + " (yet)")
    text = store.candidate_text(run_id, h) or ""
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}")
    else:
        sys.stdout.write(text)


@runs.command()
@click.argument("run")
@_RUN_DIR
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Where to write the page (default: <run-dir>/<run>/report.html).")
def report(run: str, run_dir: str, output: str | None) -> None:
    """Write a self-contained HTML report of RUN and print its path."""
    from cake_agents.report import write_report

    store = open_runs_store(run_dir, "--run-dir")
    run_id = _find(store, run)
    path = Path(output) if output else Path(run_dir) / run_id / "report.html"
    write_report(store, run_id, path)
    click.echo(f"wrote {path}")
    click.echo(f"open {path.resolve().as_uri()}")
