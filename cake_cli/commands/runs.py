"""`cake runs list | show RUN | best RUN | diff A B | report RUN | dispatch RUN...`: what
`cake evolve` stored.

RUN is a run id, a unique prefix of one, or `latest`.  A kernel of a run (for `diff` and
`show --candidate`) is `RUN` (its best kernel), `RUN:best`, `RUN:seed` or `RUN:HASH` (a
candidate's hash or a unique prefix of one).  The runs store is
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


def _kernel_ref(store: RunsStore, ref: str) -> tuple[str, str]:
    """(run id, candidate hash) of `RUN`, `RUN:best`, `RUN:seed` or `RUN:HASH`."""
    from cake_agents.store import StoreError

    run_ref, _, cand = ref.partition(":")
    run_id = _find(store, run_ref)
    try:
        return run_id, store.find_candidate(run_id, cand or "best")
    except StoreError as exc:
        raise click.UsageError(str(exc)) from exc


def _echo_candidate(view: dict[str, Any], *, diffs: bool, indent: str = "  ") -> None:
    """A kept candidate: where it came from, why, a chain's steps and, with `diffs`, what
    it changed against its parent and the seed (a chain: step by step)."""
    if view.get("intent"):
        click.echo(f"{indent}intent: {view['intent']}")
    elif view.get("rationale") and not view["steps"]:
        click.echo(f"{indent}why: {view['rationale']}")
    for i, st in enumerate(view["steps"]):
        click.echo(f"{indent}step {i + 1}: {st['tactic']} "
                   f"{json.dumps(st['params'], sort_keys=True)}: {st['rationale']}")
        if diffs and st["diff"]:
            click.echo(_indented(st["diff"], indent + "  "))
    if diffs:
        for label, key in (("against its parent", "diff_parent"),
                           ("against the seed", "diff_seed")):
            if view[key]:
                click.echo(f"{indent}diff {label}:")
                click.echo(_indented(view[key], indent + "  "))


def _indented(text: str, indent: str) -> str:
    return "\n".join(indent + line for line in text.rstrip("\n").splitlines())


@runs.command()
@click.argument("run")
@_RUN_DIR
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--diffs", is_flag=True,
              help="Show each kept candidate's diff against its parent and the seed.")
@click.option("--candidate", "cand_ref", metavar="HASH",
              help="Show one candidate (a hash, a unique prefix, `seed` or `best`) in full: "
                   "origin, intent, chain steps and diffs.")
def show(run: str, run_dir: str, as_json: bool, diffs: bool, cand_ref: str | None) -> None:
    """Configuration, budget use, best kernel, winners, kept candidates and failure classes
    of RUN.

    Each kept candidate (one that passed its gates) is listed with its score, its origin,
    the model's stated intent or the tactic's rationale, and a chain's steps one per line;
    --diffs adds what it changed against its parent and against the seed.
    """
    from cake_agents.observe import candidate_view, kept

    store = open_runs_store(run_dir, "--run-dir")
    if cand_ref is not None:
        run_id, h = _kernel_ref(store, f"{run}:{cand_ref}")
        view = candidate_view(store, run_id, h)
        if as_json:
            click.echo(json.dumps(view, indent=2))
            return
        click.echo(f"candidate {h} of run {run_id}")
        click.echo(f"  {view['origin']} ({view['tactic']}), generation {view['step']}, "
                   f"parent {(view['parent'] or '-')[:10]}")
        _echo_candidate(view, diffs=True)
        return
    run_id = _find(store, run)
    r = store.run(run_id)
    assert r is not None
    s = r["summary"] or {}
    failures = store.failures(run_id)
    by_sig: dict[tuple[str, str, str], int] = {}
    for f in failures:
        key = (f["gate"], f["code"], f["construct"] or f["norm_message"])
        by_sig[key] = by_sig.get(key, 0) + 1
    kept_views = kept(store, run_id)
    if as_json:
        click.echo(json.dumps({"run": {k: r[k] for k in r if k != "config"},
                               "config": r["config"],
                               "kept": kept_views,
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
    if kept_views:
        click.echo("kept candidates (evaluation, score, hash, origin, parent):")
        for v in kept_views:
            click.echo(f"  #{v['seq']:<3} {_speedup(v['score']):>8}  {v['hash'][:10]}  "
                       f"{v['origin']:<8} {v['tactic']:<18} parent "
                       f"{(v['parent'] or '-')[:10]}")
            _echo_candidate(v, diffs=diffs, indent="         ")
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
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@_RUN_DIR
@click.option("--name", help="Name of the merged dispatcher (its C++ namespace is "
              "cake_dispatch_NAME; default: the first run's task).")
@click.option("--output", "-o", type=click.Path(file_okay=False), required=True,
              help="Directory for dispatch.json, dispatch.hpp and each variant's .cake.")
def dispatch(run_refs: tuple[str, ...], run_dir: str, name: str | None, output: str) -> None:
    """One dispatcher over several portfolio runs: a family of tasks that take the same
    shape dims and differ in a size their kernels fix (attention at head dims 64, 128 and
    256: `cake runs dispatch RUN64 RUN128 RUN256 -o attention/`).  A shape goes to the
    nearest bucket whose kernel admits it, the fixed size included."""
    from cake_agents.portfolio import MergeError, dispatcher_cpp, merge_tables

    store = open_runs_store(run_dir, "--run-dir")
    tables, texts = [], {}
    for ref in run_refs:
        run_id = _find(store, ref)
        raw = store.artifact(run_id, "dispatch.json")
        if raw is None:
            raise click.UsageError(f"run {run_id} has no dispatcher: run it with "
                                   "`cake evolve --mode portfolio`")
        table = json.loads(raw)
        tables.append(table)
        for row in table["buckets"]:
            texts[row["symbol"]] = store.candidate_text(run_id, row["kernel"]) or ""
    try:
        merged = merge_tables(tables, name or tables[0]["task"])
    except MergeError as exc:
        raise click.UsageError(str(exc)) from exc
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dispatch.json").write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    (out / "dispatch.hpp").write_text(dispatcher_cpp(merged), encoding="utf-8")
    for row in merged["buckets"]:
        (out / f"{row['symbol']}.cake").write_text(texts[row["symbol"]], encoding="utf-8")
    click.echo(f"wrote {out / 'dispatch.hpp'}: {len(merged['buckets'])} variants from "
               f"{len(tables)} runs, dispatching on {', '.join(merged['dims'])}")


@runs.command()
@click.argument("a")
@click.argument("b")
@_RUN_DIR
@click.option("--context", "-U", type=click.IntRange(0), default=3, show_default=True,
              help="Lines of context around each change.")
def diff(a: str, b: str, run_dir: str, context: int) -> None:
    """A unified diff from kernel A to kernel B.

    Each is `RUN` (the run's best kernel), `RUN:best`, `RUN:seed` or `RUN:HASH` (a
    candidate, by hash or unique prefix); RUN is an id, a unique prefix or `latest`.
    Two runs' bests: `cake runs diff RUN1 RUN2`; what a run changed:
    `cake runs diff latest:seed latest`.  Prints nothing when the kernels are equal.
    """
    from cake_agents.observe import unified

    store = open_runs_store(run_dir, "--run-dir")
    (ra, ha), (rb, hb) = _kernel_ref(store, a), _kernel_ref(store, b)
    ta, tb = store.candidate_text(ra, ha) or "", store.candidate_text(rb, hb) or ""
    sys.stdout.write(unified(ta, tb, f"{ra}:{ha[:10]}", f"{rb}:{hb[:10]}", context))


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
    if output:
        path = Path(output)
    else:
        from cake_agents.names import UnsafeName, run_folder

        try:
            path = run_folder(Path(run_dir), run_id) / "report.html"
        except UnsafeName as exc:
            raise click.UsageError(str(exc)) from exc
    write_report(store, run_id, path)
    click.echo(f"wrote {path}")
    click.echo(f"open {path.resolve().as_uri()}")
