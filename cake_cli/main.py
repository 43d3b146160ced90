"""The `cake` command line: the group, `check`, `explain`, `lsp` and `rules`.

The other commands live in `cake_cli.commands`, one module each.  Start-up stays fast
because every command imports the compiler, the language server or the agents only when
it runs (`cake --help` loads click and nothing else).  No traceback ever reaches the user: a
usage problem or an internal fault prints a message and exits with status 2.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from pathlib import Path
from urllib.parse import urlsplit

import click

from cake_cli.args import check_arch, display

# The compiler, the server and the agents are imported inside the command functions, so
# that each command (and `cake --help`) loads only what it runs.

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class CakeGroup(click.Group):
    """Turns any escaped exception into a one-line message and exit status 2."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort,
                SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("cake: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:
            click.echo(f"cake: internal error: {type(exc).__name__}: {exc}", err=True)
            click.echo("cake: please report this with the input that triggered it", err=True)
            sys.exit(EXIT_ERROR)


#: Commands that live in their own modules, imported only when invoked (name -> "module:attr").
LAZY_COMMANDS: dict[str, str] = {
    "plugins": "cake_cli.commands.plugins:plugins",
    "cost": "cake_cli.commands.cost:cost",
    "calibrate": "cake_cli.commands.calibrate:calibrate",
    "run": "cake_cli.commands.run:run",
    "bench": "cake_cli.commands.bench:bench",
    "lower": "cake_cli.commands.lower:lower",
    "compile": "cake_cli.commands.compile:compile_cmd",
    "evolve": "cake_cli.commands.evolve:evolve",
    "runs": "cake_cli.commands.runs:runs",
    "failures": "cake_cli.commands.failures:failures",
    "promote": "cake_cli.commands.promote:promote",
}


class LazyCakeGroup(CakeGroup):
    """Loads the commands in LAZY_COMMANDS on first use, so start-up stays fast."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            mod_name, _, attr = LAZY_COMMANDS[cmd_name].partition(":")
            return getattr(importlib.import_module(mod_name), attr)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyCakeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cake-kernels", prog_name="cake")
def main() -> None:
    """CAKE: write, verify, cost and lower hardware-explicit GPU kernels."""


def _collect(paths: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files.extend(sorted(f for f in path.rglob("*.cake") if f.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise click.UsageError(f"no such file or directory: {p}")
    return files


def _absolute_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Code scanning ignores a relative helpUri, so only an absolute URL is accepted."""
    parts = urlsplit(value or "")
    if value is not None and not (parts.scheme and parts.netloc):
        raise click.BadParameter(f"{value!r} is not an absolute URL (e.g. https://host/path/)")
    return value


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--arch", help="Target arch for every kernel (overrides @kernel(arch=...)).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text",
              show_default=True, help="Output format.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report here.")
@click.option("--resources", is_flag=True,
              help="Also print the per-role and per-buffer resource table.")
@click.option("--color/--no-color", default=None, help="Colour (default: when on a terminal).")
@click.option("--sarif-help-base", metavar="URL", callback=_absolute_url,
              help="Absolute URL that each rule's docs/rules/CODE.md is joined to for its "
                   "SARIF helpUri (default: this version's tag of the CAKE repository).")
def check(paths: tuple[str, ...], arch: str | None, fmt: str, output: str | None,
          resources: bool, color: bool | None, sarif_help_base: str | None) -> None:
    """Check .cake files (or every .cake file under a directory).

    Exit status: 0 clean, 1 findings (errors or warnings), 2 usage or internal error.
    """
    from cake_core.check import check_source, default_plugins
    from cake_core.source import SourceFile

    check_arch(arch)
    files = _collect(paths)
    if not files:
        raise click.UsageError("no .cake files found")
    for warning in default_plugins().warnings:
        click.echo(f"warning: {warning}", err=True)
    diags = []
    sources: dict[str, SourceFile] = {}
    results = []
    for f in files:
        try:
            src = SourceFile.read(f, display(f))
        except OSError as exc:
            raise click.UsageError(f"cannot read {f}: {exc.strerror}") from exc
        sources[src.path] = src
        res = check_source(src, arch=arch)
        results.append(res)
        diags.extend(res.diagnostics)
    if fmt == "json":
        from cake_core.diagnostics.json_format import render_json

        text = render_json(diags, sources)
    elif fmt == "sarif":
        from cake_core.diagnostics.sarif import HELP_BASE_URI, render_sarif, repository_root
        from cake_core.docs import rule_doc

        text = render_sarif(diags, sources, repo_root=repository_root(Path.cwd()),
                            help_base_uri=sarif_help_base or HELP_BASE_URI, rule_docs=rule_doc)
    else:
        from cake_core.diagnostics.text import render_summary, render_text

        use_color = (sys.stdout.isatty() and output is None) if color is None else color
        body = render_text(diags, sources, color=use_color)
        summary = render_summary(diags, color=use_color)
        checked = f"checked {len(files)} file{'s' if len(files) != 1 else ''}"
        text = (body + "\n" if body else "") + (summary if diags else f"{checked}: "
                                                 f"{summary}") + "\n"
        if resources:
            text += _resource_tables(results, arch)
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    else:
        click.echo(text, nl=not text.endswith("\n"))
    if any(d.code in ("CK901",) for d in diags):
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if any(d.severity.value in ("error", "warning") for d in diags)
             else EXIT_CLEAN)


def _resource_tables(results: list, arch: str | None) -> str:
    try:
        from cake_core.verify.resources import render_resource_table, resource_table
    except ImportError:
        return "resource tables are not available in this build\n"
    from cake_core.hardware import get_arch

    out = []
    for res in results:
        if res.program is None:
            continue
        for k in res.program.kernels:
            spec = get_arch(arch or k.arch)
            if spec is not None:
                out.append(render_resource_table(resource_table(k, spec)))
    return "\n".join(out) + ("\n" if out else "")


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain a diagnostic code (e.g. CK201): what it finds, why, and how to fix it."""
    from cake_core.diagnostics.codes import all_rules, lookup
    from cake_core.docs import rule_doc

    rule = lookup(code)
    if rule is None:
        known = [r.code for r in all_rules()]
        hit = difflib.get_close_matches(code.upper(), known, n=1)
        raise click.UsageError(f"unknown code {code!r}"
                               + (f"; did you mean {hit[0]}?" if hit else ""))
    click.echo(rule_doc(rule))


@main.command()
@click.option("--tcp", metavar="HOST:PORT", help="Serve over TCP (for debugging) instead of stdio.")
@click.option("--log-file", type=click.Path(dir_okay=False), help="Write the server's log here.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              help="How much to log.")
def lsp(tcp: str | None, log_file: str | None, log_level: str | None) -> None:
    """Run the CAKE language server (stdio by default)."""
    try:
        from cake_lsp.server import main as serve
    except ImportError as exc:
        raise click.ClickException(f"the language server is not available: {exc}") from exc
    argv = ["--tcp", tcp] if tcp else []
    argv += ["--log-file", log_file] if log_file else []
    argv += ["--log-level", log_level.upper()] if log_level else []
    serve(argv)


@main.command(name="rules")
def rules_cmd() -> None:
    """List every diagnostic code with its name and summary."""
    from cake_core.diagnostics.codes import all_rules

    for r in all_rules():
        click.echo(f"{r.code}  {r.name:<28} {r.severity.value:<8} {r.summary}")
