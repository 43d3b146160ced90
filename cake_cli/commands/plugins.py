"""`cake plugins list | doctor | new NAME`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.


@click.group(name="plugins")
def plugins() -> None:
    """Inspect, diagnose and scaffold CAKE plugins."""


@plugins.command(name="list")
@click.option("--verbose", "-v", is_flag=True, help="Show every item with its provenance.")
def list_cmd(verbose: bool) -> None:
    """List loaded plugins (built-ins first) and their items."""
    from cake_core.plugins import load_config, load_plugins

    ps = load_plugins(load_config())
    for p in ps.plugins:
        counts = f"{len(p.rules)} rules, {len(p.primitives)} primitives, " \
                 f"{len(p.tactics)} tactics, {len(p.calibrations)} calibrations"
        click.echo(f"{p.name} {p.version} (plugin API {p.api}): {counts}")
        if verbose:
            for kind, name, prov in p.items():
                examples = f"; examples: {', '.join(prov.examples)}" if prov.examples else ""
                click.echo(f"  {kind:<11} {name:<28} origin: {prov.origin}; "
                           f"date: {prov.date}{examples}")
    for f in ps.failures:
        click.echo(f"{f.plugin}: DISABLED{' ' + f.item if f.item else ''}: {f.reason}", err=True)


@plugins.command()
def doctor() -> None:
    """Load every plugin, run its rules on the examples, and report what fails.

    The examples are ./examples/*.cake when there are any, else the shipped ones.
    """
    from cake_core.check import check_source
    from cake_core.plugins import load_config, load_plugins
    from cake_core.shipped import EXAMPLES_DIR
    from cake_core.source import SourceFile, display_path

    ps = load_plugins(load_config())
    for warning in ps.warnings:
        click.echo(f"config: {warning}")
    samples = sorted(Path("examples").glob("*.cake")) or sorted(EXAMPLES_DIR.glob("*.cake"))
    for s in samples:
        check_source(SourceFile.read(s, display_path(s)), plugins=ps)
    for p in ps.plugins:
        click.echo(f"ok    {p.name} {p.version}")
    for f in ps.failures:
        click.echo(f"FAIL  {f.plugin}{':' + f.item if f.item else ''}: {f.reason}")
    sys.exit(1 if ps.failures or ps.warnings else 0)


@plugins.command()
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=".",
              show_default=True, help="Where to create the plugin folder.")
def new(name: str, directory: str) -> None:
    """Scaffold a pip-installable plugin with a rule, a tactic, tests and docs."""
    from cake_core.plugins.scaffold import ScaffoldError, scaffold

    try:
        root = scaffold(name, Path(directory))
    except ScaffoldError as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(f"created {root}")
    click.echo(f"next: pip install -e {root} && python -m pytest {root}/tests")
