"""`cake calibrate RESULTS.json`: fit the cost model's coefficients to measured runs.

RESULTS.json is a list of runs: {"kernel": "path.cake", "dims": {"M": 4096, ...} or
"M=4096,...", "gpu": "H200" and/or "arch": "sm_90a", "measured_ms": 0.21, "name":
optional kernel name}.  Kernel paths are relative to the results file.  One calibration is
fitted per architecture; `--output` writes them as JSON for `cake cost --calibration`.

Exit status: 0 fitted, 1 the fit failed, 2 usage problems (unreadable results, bad runs).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.


@click.command(name="calibrate")
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write the calibration JSON here.")
@click.option("--name", default=None, help="Calibration name (default: from the file name).")
@click.option("--fit", "fit_params", default=None, metavar="NAME,...",
              help="Coefficients to fit (default: the usual set; see docs/cost.md).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Print a summary (text) or the calibration (json).")
def calibrate(results: str, output: str | None, name: str | None, fit_params: str | None,
              fmt: str) -> None:
    """Fit per-arch cost-model coefficients to measured run times (least squares on log
    time) and record where they came from."""
    from cake_core.cost.calibration import COEFFICIENT_DOCS, DEFAULT_FIT, save_calibrations
    from cake_core.cost.fit import RunError, load_runs
    from cake_core.cost.fit import calibrate as fit_calibrations

    params: tuple[str, ...] = DEFAULT_FIT
    if fit_params:
        params = tuple(p.strip() for p in fit_params.split(",") if p.strip())
        unknown = [p for p in params if p not in COEFFICIENT_DOCS]
        if unknown:
            raise click.UsageError(f"unknown coefficient(s): {', '.join(unknown)}; known: "
                                   f"{', '.join(COEFFICIENT_DOCS)}")
    try:
        runs = load_runs(results)
    except RunError as exc:
        raise click.UsageError(str(exc)) from exc
    cal_name = name or Path(results).stem
    try:
        fitted = fit_calibrations(runs, name=cal_name, params=params, source=results)
    except (ValueError, ArithmeticError) as exc:
        click.echo(f"cake calibrate: the fit failed: {exc}", err=True)
        sys.exit(1)
    cals = [c for c, _ in fitted]
    if output:
        save_calibrations(output, cals)
    if fmt == "json":
        data = [c.to_json() for c in cals]
        click.echo(json.dumps(data[0] if len(data) == 1 else data, indent=2))
        return
    for cal, res in fitted:
        err = res.errors()
        click.echo(f"{cal.name}: {cal.arch}, {len(res.measured)} runs, {res.iterations} "
                   f"iterations")
        click.echo(f"  rms log error {err['rms_log_error_before']:.3f} -> "
                   f"{err['rms_log_error']:.3f}; worst run {err['max_abs_pct_error_before']:.1f}%"
                   f" -> {err['max_abs_pct_error']:.1f}%")
        for key, value in sorted(cal.coefficients.items()):
            click.echo(f"  {key:<28} {value:>12.4g}   {COEFFICIENT_DOCS.get(key, '')}")
        if res.unconstrained:
            click.echo(f"  left at their defaults (no run depends on them): "
                       f"{', '.join(res.unconstrained)}")
        click.echo(f"  {'run':<44}{'measured':>12}{'before':>12}{'after':>12}")
        runs_for = cal.provenance.runs
        for r, before in zip(runs_for, res.predicted_before, strict=True):
            label = f"{r['kernel']} {','.join(f'{k}={v}' for k, v in r['dims'].items())}"
            click.echo(f"  {label[:43]:<44}{r['measured_ms']:>10.4f}ms{before * 1e3:>10.4f}ms"
                       f"{r['predicted_ms']:>10.4f}ms")
    if output:
        click.echo(f"wrote {output}")
