"""The `cake` command line: the group, `check`, `explain`, `lsp` and `rules`.

The other commands live in `cake_cli.commands`, one module each.  Start-up stays fast
because every command imports the compiler, the language server or the agents only when
it runs (`cake --help` loads click and nothing else).  No traceback ever reaches the user: a
usage problem or an internal fault prints a message and exits with status 2.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import io
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import click

from cake_cli.args import check_arch, parse_selection, read_sources

if TYPE_CHECKING:
    from cake_core.diagnostics.model import Diagnostic
    from cake_core.source import SourceFile

# The compiler, the server and the agents are imported inside the command functions, so
# that each command (and `cake --help`) loads only what it runs.

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class CakeGroup(click.Group):
    """Turns any escaped exception into a one-line message and exit status 2.

    Problems of the environment rather than of the compiler get their own message: a file
    that cannot be read or written (OSError), a reader that closed the pipe early
    (`cake rules | head -1`), memory running out, a runs store that is damaged or
    stayed locked; Ctrl-C exits 130.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            rv = super().main(*args, **kwargs)
        except SystemExit:
            _flush_stdout()  # a closed pipe surfaces at the last flush, not before
            raise
        _flush_stdout()
        return rv

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort,
                SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("cake: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            _broken_pipe()
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"cake: {where}{exc.strerror or exc}", err=True)
            sys.exit(EXIT_ERROR)
        except MemoryError:
            click.echo("cake: out of memory; try smaller inputs", err=True)
            sys.exit(EXIT_ERROR)
        except Exception as exc:
            if _store_problem(exc):
                click.echo(f"cake: {exc}", err=True)
                sys.exit(EXIT_ERROR)
            click.echo(f"cake: internal error: {type(exc).__name__}: {exc}", err=True)
            click.echo("cake: please report this with the input that triggered it", err=True)
            sys.exit(EXIT_ERROR)


def _store_problem(exc: Exception) -> bool:
    """A runs store that cannot be used (damaged, locked, no such run) is for the user to
    act on, not a fault of cake: `cake_agents.store.StoreError`, looked up only where a
    command loaded the agents (this module never imports them)."""
    store = sys.modules.get("cake_agents.store")
    return store is not None and isinstance(exc, store.StoreError)


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _broken_pipe()
    except (OSError, ValueError):  # stdout closed or gone: nothing left to say there
        pass


def _broken_pipe() -> NoReturn:
    """The reader of stdout went away: say so once on stderr and exit 2, with stdout
    pointed at /dev/null so that the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
    with contextlib.suppress(OSError):
        click.echo("cake: output closed before it was all written (broken pipe)", err=True)
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
    "experiment": "cake_cli.commands.experiment:experiment",
    "runs": "cake_cli.commands.runs:runs",
    "failures": "cake_cli.commands.failures:failures",
    "promote": "cake_cli.commands.promote:promote",
    "examples": "cake_cli.commands.examples:examples",
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


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`cake --version`: the release, and the plugin API a plugin must be written against."""
    if not value or ctx.resilient_parsing:
        return
    from cake_core import __version__
    from cake_core.plugins.api import PLUGIN_API_VERSION

    click.echo(f"cake {__version__} (plugin API {PLUGIN_API_VERSION})")
    ctx.exit()


@click.group(cls=LazyCakeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and the plugin API version.")
def main() -> None:
    """CAKE: write, verify, cost and lower hardware-explicit GPU kernels."""


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
@click.option("--fix/--no-fix", default=None,
              help="Apply the safe fixes and write the files back (default: `fix` in "
                   "[tool.cake], else no).")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None,
              help="With --fix or --diff: the unsafe fixes too (default: `unsafe-fixes` in "
                   "[tool.cake], else no).")
@click.option("--diff", is_flag=True,
              help="Print the fixes as a unified diff instead of writing them (exit 1 if any).")
@click.option("--select", multiple=True, metavar="CODES",
              help="Report only these codes or prefixes (comma-separated; replaces the "
                   "configured select and ignore).")
@click.option("--ignore", multiple=True, metavar="CODES",
              help="Do not report these codes or prefixes (comma-separated).")
@click.option("--extend-select", multiple=True, metavar="CODES",
              help="Report these codes or prefixes too (comma-separated).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--statistics", is_flag=True, help="Print a count per code instead of findings.")
@click.option("--quiet", "-q", is_flag=True,
              help="Print only the summary line, and nothing when there is no finding.")
@click.option("--stdin-filename", metavar="PATH",
              help="With `-`: the name to report the text read from stdin under.")
@click.option("--sarif-help-base", metavar="URL", callback=_absolute_url,
              help="Absolute URL that each rule's docs/rules/CODE.md is joined to for its "
                   "SARIF helpUri (default: this version's tag of the CAKE repository).")
def check(paths: tuple[str, ...], arch: str | None, fmt: str, output: str | None,
          resources: bool, color: bool | None, fix: bool | None, unsafe_fixes: bool | None,
          diff: bool, select: tuple[str, ...], ignore: tuple[str, ...],
          extend_select: tuple[str, ...], exit_zero: bool, statistics: bool, quiet: bool,
          stdin_filename: str | None, sarif_help_base: str | None) -> None:
    """Check .cake files (or every .cake file under a directory; `-` reads stdin).

    Exit status: 0 clean, 1 findings (errors or warnings) or, with --diff, fixes to
    apply, 2 usage or internal error.  docs/cli.md describes every option.
    """
    from functools import partial

    from cake_core.check import check_source, default_plugins
    from cake_core.fix import fix_source, unified_diff
    from cake_core.plugins import load_config

    check_arch(arch)
    if statistics and fmt != "text":
        raise click.UsageError("--statistics prints text; it cannot be combined with --format")
    sources, from_stdin = read_sources(paths, stdin_filename)
    plugins = default_plugins()
    for warning in plugins.warnings:
        click.echo(f"warning: {warning}", err=True)
    config = load_config()
    fix = config.fix if fix is None else fix
    unsafe_fixes = config.unsafe_fixes if unsafe_fixes is None else unsafe_fixes
    selection = plugins.selection.then(parse_selection(select, ignore, extend_select))
    checker = partial(check_source, arch=arch, selection=selection)
    results, fixed, diffs = [], [], []
    for src in sources:
        if not (fix or diff):
            results.append(checker(src))
            continue
        outcome = fix_source(src, unsafe=unsafe_fixes, check=checker)
        results.append(outcome.remaining)
        fixed.extend(outcome.fixed)
        if diff:
            diffs.append(unified_diff(outcome, src))
        elif from_stdin:
            click.echo(outcome.text, nl=False)  # the fixed text is the output, as ruff does
        elif outcome.changed:
            Path(src.path).write_text(outcome.text, encoding="utf-8", newline="")
    if diff:
        click.echo("".join(diffs), nl=False)
        click.echo(f"would fix {_findings(len(fixed))}", err=True)
        sys.exit(EXIT_FINDINGS if fixed else EXIT_CLEAN)
    diags = [d for r in results for d in r.diagnostics]
    text = _report(diags, {r.source.path: r.source for r in results}, fmt, color, output,
                   statistics, quiet, len(sources), sarif_help_base)
    if fix and fixed and not quiet and fmt == "text":
        text = f"fixed {_findings(len(fixed))}\n" + text
    if resources and fmt == "text":
        text += _resource_tables(results, arch)
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    elif text:
        click.echo(text, nl=not text.endswith("\n"), err=fix and from_stdin)
    if any(d.code in ("CK901",) for d in diags):
        sys.exit(EXIT_ERROR)
    failing = any(d.severity.value in ("error", "warning") for d in diags)
    sys.exit(EXIT_FINDINGS if failing and not exit_zero else EXIT_CLEAN)


def _findings(n: int) -> str:
    return f"{n} finding{'s' if n != 1 else ''}"


def _report(diags: list[Diagnostic], sources: dict[str, SourceFile], fmt: str,
            color: bool | None, output: str | None, statistics: bool, quiet: bool,
            files: int, sarif_help_base: str | None) -> str:
    """The report in `fmt`; with `quiet` only the summary line, and nothing when clean."""
    if fmt == "json":
        from cake_core.diagnostics.json_format import render_json

        return render_json(diags, sources)
    if fmt == "sarif":
        from cake_core.diagnostics.sarif import HELP_BASE_URI, render_sarif, repository_root
        from cake_core.docs import rule_doc

        return render_sarif(diags, sources, repo_root=repository_root(Path.cwd()),
                            help_base_uri=sarif_help_base or HELP_BASE_URI, rule_docs=rule_doc)
    from cake_core.diagnostics.text import render_statistics, render_summary, render_text

    use_color = (sys.stdout.isatty() and output is None) if color is None else color
    summary = render_summary(diags, color=use_color)
    if quiet:
        return summary + "\n" if diags else ""
    body = render_statistics(diags) if statistics else render_text(diags, sources,
                                                                   color=use_color)
    checked = f"checked {files} file{'s' if files != 1 else ''}"
    return (body + "\n" if body else "") + (summary if diags else f"{checked}: {summary}") \
        + "\n"


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
