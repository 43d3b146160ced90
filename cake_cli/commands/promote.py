"""`cake promote SIGNATURE --as rule|tactic|primitive|calibration`: a recurring failure
becomes a plugin item, with its failing kernels as regression tests; `cake promote
--ledger` lists every promotion and where it fired since.

The signature is a digest (or a unique prefix of one) from `cake failures`.  The item is
written into the plugin package at `--plugin` (created when the folder is new or empty,
extended when it is an existing plugin), and recorded in `<runs-dir>/ledger.sqlite`.
With `--model` (a litellm model string) a model drafts the body, kept only if the
item's tests pass with it.  Exit status: 0 written and its tests pass, 1 written but its
tests fail (a skeleton to finish by hand), 2 usage error.  See docs/mining.md.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.

KINDS = ("rule", "tactic", "primitive", "calibration")


def _render_ledger(ledger: Any) -> str:
    promos = ledger.promotions()
    if not promos:
        return "no promotions yet"
    out = []
    for p in promos:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(p.created))
        state = "tests passed" if p.validated else "tests FAIL"
        codes = f" ({', '.join(p.codes)})" if p.codes else ""
        out.append(f"#{p.id}  {when}  {p.kind} {p.name}{codes} in {p.plugin} "
                   f"[{p.drafted_by}, {state}]")
        out.append(f"    trigger  {p.digest} {p.signature}")
        out.append(f"             {p.count} failure{'s' if p.count != 1 else ''} in "
                   f"{len(p.runs)} run{'s' if len(p.runs) != 1 else ''}: {', '.join(p.runs)}")
        out.append(f"    tests    {', '.join(p.tests)} ({len(p.examples)} example kernels)")
        for x in p.problems:
            out.append(f"    problem  {x}")
        fired = ledger.firings(p.id)
        if fired:
            gates: dict[str, set[str]] = {}
            for f in fired:
                gates.setdefault(f["run_id"], set()).add(f["gate"])
            n = sum(f["count"] for f in fired)
            out.append(f"    fired    {n} time{'s' if n != 1 else ''} in {len(gates)} later "
                       f"run{'s' if len(gates) != 1 else ''}: " + ", ".join(
                           f"{r} ({'/'.join(sorted(g))})" for r, g in gates.items()))
        else:
            out.append("    fired    not yet")
    return "\n".join(out)


def _show_ledger(runs_dir: str, fmt: str) -> None:
    from cake_agents.mining.ledger import LEDGER_NAME, Ledger
    from cake_agents.store import STORE_NAME, RunsStore

    path = Path(runs_dir) / LEDGER_NAME
    if not path.is_file():
        click.echo("[]" if fmt == "json" else f"no promotions yet (no ledger at {path})")
        return
    with Ledger(path) as ledger:
        store_path = Path(runs_dir) / STORE_NAME
        if store_path.is_file():
            store = RunsStore(store_path)
            try:
                ledger.refresh_firings(store)
            finally:
                store.close()
        if fmt == "json":
            click.echo(json.dumps([{**p.to_json(), "firings": ledger.firings(p.id)}
                                   for p in ledger.promotions()], indent=2))
        else:
            click.echo(_render_ledger(ledger))


@click.command(name="promote")
@click.argument("signature", required=False)
@click.option("--as", "kind", type=click.Choice(KINDS), help="What to turn it into.")
@click.option("--plugin", "plugin_dir", type=click.Path(file_okay=False),
              default="cake-promoted", show_default=True,
              help="Plugin package folder: created when new or empty, extended otherwise.")
@click.option("--name", help="The item's name (default: from the construct and the code).")
@click.option("--runs-dir", "--run-dir", "runs_dir", type=click.Path(file_okay=False),
              default="cake-runs", show_default=True, help="Where runs are stored.")
@click.option("--run", "run_refs", multiple=True, help="Mine only these runs (repeatable).")
@click.option("--model", help="A litellm model string: a model drafts the item's body.")
@click.option("--examples", "examples_dir", type=click.Path(file_okay=False),
              help="Kernels the item must leave clean (default: ./examples, else CAKE's).")
@click.option("--force", is_flag=True, help="Promote a signature promoted before.")
@click.option("--no-tests", is_flag=True, help="Write the item without running its tests.")
@click.option("--ledger", "show_ledger", is_flag=True,
              help="List every promotion, its trigger, tests and later firings.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def promote(signature: str | None, kind: str | None, plugin_dir: str, name: str | None,
            runs_dir: str, run_refs: tuple[str, ...], model: str | None,
            examples_dir: str | None, force: bool, no_tests: bool, show_ledger: bool,
            fmt: str) -> None:
    """Turn the recurring failure SIGNATURE into a rule, tactic, primitive or calibration."""
    if show_ledger:
        _show_ledger(runs_dir, fmt)
        return
    if not signature or not kind:
        raise click.UsageError("give a SIGNATURE (from `cake failures`) and --as KIND, or "
                               "--ledger")
    if name is not None and ("/" in name or "\\" in name or ".." in name):
        raise click.UsageError(f"--name {name!r}: an item's name is a name, not a path "
                               "(no '/', '\\' or '..')")
    from cake_agents.mining.promote import PromotionError, default_examples_dir
    from cake_agents.mining.promote import promote as run_promotion

    client = None
    if model:
        from cake_agents.models import LiteLLMClient

        client = LiteLLMClient(model)
    try:
        res = run_promotion(Path(runs_dir), signature, kind, plugin_dir=Path(plugin_dir),
                            name=name, examples_dir=Path(examples_dir) if examples_dir
                            else default_examples_dir(), model=client, force=force,
                            run_refs=list(run_refs), run_tests=not no_tests)
    except PromotionError as exc:
        raise click.UsageError(str(exc)) from exc
    p = res.promotion
    if fmt == "json":
        click.echo(json.dumps(res.to_json(), indent=2))
    else:
        codes = f" ({', '.join(p.codes)})" if p.codes else ""
        click.echo(f"promoted {p.digest} ({p.signature})")
        click.echo(f"  as       {p.kind} {p.name}{codes}, drafted by {p.drafted_by}")
        click.echo(f"  plugin   {res.plugin.name} at {res.plugin.root}"
                   + (" (new)" if res.plugin.created else ""))
        click.echo(f"  module   {p.module}")
        for pat in p.patterns:
            click.echo(f"  matches  {pat}")
        verdict = "skipped" if no_tests else ("pass" if p.validated else "FAIL")
        click.echo(f"  tests    {', '.join(p.tests)}: {verdict} ({len(p.examples)} example "
                   "kernels)")
        for x in p.problems:
            click.echo(f"  problem  {x}")
        click.echo(f"  ledger   #{p.id} in {Path(runs_dir) / 'ledger.sqlite'}")
        click.echo(f"install it with: pip install -e {res.plugin.root}")
    if not no_tests and not p.validated:
        sys.exit(1)
