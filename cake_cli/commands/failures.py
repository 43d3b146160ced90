"""`cake failures [RUN...]`: recurring failure clusters across the runs of `cake evolve`.

Reads `<runs-dir>/runs.sqlite` (and the promotion ledger beside it), groups failures by
normalized signature, and lists the clusters seen at least `--min-count` times with their
counts, first and last sighting, the stage that caught them, example lines from the
candidate texts and their parent chains.  Prime candidates (late failures a static rule
could catch; docs/mining.md) come first, with the `cake promote` line that turns them
into a rule.  Like `cake runs`, this imports `cake_agents` only when it runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from cake_cli.args import open_runs_store

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.



def _render(clusters: list[Any], runs: int, min_count: int) -> str:
    prime = sum(c.prime for c in clusters)
    head = (f"{len(clusters)} recurring failure signature{'s' if len(clusters) != 1 else ''} "
            f"in {runs} run{'s' if runs != 1 else ''} (at least {min_count} failure"
            f"{'s' if min_count != 1 else ''} each)"
            + (f"; {prime} prime candidate{'s' if prime != 1 else ''}" if prime else ""))
    out = [head]
    for c in clusters:
        tag = "[PRIME] " if c.prime else ""
        out.append("")
        out.append(f"{tag}{c.digest}  {c.stage:<7} {c.code:<10} {c.count} failure"
                   f"{'s' if c.count != 1 else ''}, {len(c.candidates)} candidate"
                   f"{'s' if len(c.candidates) != 1 else ''}, {len(c.runs)} run"
                   f"{'s' if len(c.runs) != 1 else ''}  (first {_t(c.first_seen)}, last "
                   f"{_t(c.last_seen)})")
        if c.construct:
            out.append(f"  construct  {c.construct}")
        if c.norm_message:
            out.append(f"  message    {c.norm_message}")
        if c.prime:
            out.append(f"  prime      {c.why}")
            out.append(f"  promote    cake promote {c.digest[:8]} --as rule")
        elif c.suggest and not c.promoted:
            out.append(f"  promote    cake promote {c.digest[:8]} --as {c.suggest}")
        if not c.prime and not c.promoted and c.stage in ("sim", "compile", "gpu"):
            out.append(f"  not prime  {c.why}")
        for p in c.promoted:
            out.append(f"  promoted   {p['kind']} {p['name']}"
                       + (f" ({', '.join(p['codes'])})" if p["codes"] else "")
                       + f" in {p['plugin']}, ledger #{p['id']}")
        if c.caught_statically is not None:
            cs = c.caught_statically
            if cs["count"]:
                out.append(f"  since      caught at the {'/'.join(cs['stages'])} stage "
                           f"{cs['count']} time{'s' if cs['count'] != 1 else ''} in "
                           f"{len(cs['runs'])} later run{'s' if len(cs['runs']) != 1 else ''}"
                           f" ({', '.join(cs['codes'])})")
            else:
                out.append("  since      not seen again")
        if c.promoted_from is not None:
            pf = c.promoted_from
            out.append(f"  reported   by promoted {pf['kind']} {pf['name']} (ledger "
                       f"#{pf['id']}), from {pf['digest']} {pf['signature']}")
        for e in c.examples[:1]:
            where = f"line {e.line + 1}" if e.line is not None else "line unknown"
            out.append(f"  example    run {e.run_id}, candidate {e.hash[:10]} (step {e.step}),"
                       f" {where}")
            for n, text, hit in e.snippet:
                out.append(f"    {'>' if hit else ' '} {n:>4} | {text}")
            if e.trajectory:
                out.append("    trajectory " + " <- ".join(
                    f"{t['hash'][:10]} ({t['origin']}, {t['status']})" for t in e.trajectory))
    return "\n".join(out)


def _t(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "?"


@click.command(name="failures")
@click.argument("runs", nargs=-1)
@click.option("--runs-dir", "--run-dir", "runs_dir", type=click.Path(file_okay=False),
              default="cake-runs", show_default=True, help="Where runs are stored.")
@click.option("--min-count", type=click.IntRange(min=1), default=2, show_default=True,
              help="List signatures seen at least this many times.")
@click.option("--prime", "only_prime", is_flag=True, help="Only prime candidates.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def failures(runs: tuple[str, ...], runs_dir: str, min_count: int, only_prime: bool,
             fmt: str) -> None:
    """Recurring failures of RUNs (ids, prefixes or `latest`; default: every run).

    Failures are clustered by normalized signature (the code and the shape of the
    construct, not the names and numbers).  Prime candidates, failures caught late that
    a static rule could catch, are listed first with the `cake promote` line for them.
    """
    from cake_agents.mining.clusters import build_clusters, resolve_runs
    from cake_agents.mining.gaps import backfill_run
    from cake_agents.mining.ledger import LEDGER_NAME, Ledger
    from cake_agents.store import StoreError

    store = open_runs_store(runs_dir, "--runs-dir")
    ledger = None
    try:
        try:
            run_ids = resolve_runs(store, runs)
        except StoreError as exc:
            raise click.UsageError(str(exc)) from exc
        for rid in run_ids:
            backfill_run(store, rid)
        if (Path(runs_dir) / LEDGER_NAME).is_file():
            ledger = Ledger.beside(Path(runs_dir))
            ledger.refresh_firings(store)
        clusters = build_clusters(store, run_ids, ledger=ledger, min_count=min_count)
        if only_prime:
            clusters = [c for c in clusters if c.prime]
        if fmt == "json":
            click.echo(json.dumps({"runs": run_ids, "min_count": min_count,
                                   "clusters": [c.to_json() for c in clusters]}, indent=2))
        else:
            click.echo(_render(clusters, len(run_ids), min_count))
    finally:
        if ledger is not None:
            ledger.close()
        store.close()
