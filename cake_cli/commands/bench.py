"""`cake bench KERNEL --task T`: check and time a kernel on the GPU against the baseline.

KERNEL is a .cake file, optionally `file.cake::kernel_name`.  Each shape (the task's GPU
shapes, or `--shapes`) runs under the runner's contract (docs/running.md): several seeds,
poisoned outputs, inputs checked unchanged, candidate -> reference -> candidate, timing
with an L2 flush before every call in rounds alternating with the baseline, a re-check
after timing, and flags for times below the roofline floor or beyond 10x the baseline.
Every candidate runs in its own process, killed when it makes no progress for `--timeout`
seconds.

`-o FILE` writes the shapes with a trusted time in the format `cake calibrate` reads.

Exit status: 0 every shape correct, 1 a shape wrong, failed or hung (or the kernel could
not be lowered or compiled), 2 usage problems or no GPU.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from cake_cli.args import parse_dims
from cake_cli.gpu_run import execute, write_runs

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.

if TYPE_CHECKING:
    from cake_core.tasks import Shape


def _shapes(values: tuple[str, ...]) -> list[Shape] | None:
    from cake_core.tasks import Shape

    out = []
    for v in values:
        for part in v.split(";"):
            if part.strip():
                out.append(Shape(parse_dims(part)))
    return out or None


@click.command(name="bench")
@click.argument("kernel", metavar="KERNEL")
@click.option("--task", "task_name", required=True,
              help="Task name (shipped, or ./examples/tasks/NAME.py) or a task file path.")
@click.option("--shapes", "shapes", multiple=True, metavar="NAME=INT,...",
              help="A shape to run instead of the task's (repeatable, or `;`-separated).")
@click.option("--seeds", type=click.IntRange(1, 16), default=2, show_default=True,
              help="Input seeds per shape (0, 1, ...).")
@click.option("--rounds", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Timing rounds, alternating the candidate and the baseline.")
@click.option("--calls", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="Timed calls per side per round (each after an L2 flush).")
@click.option("--warmup", type=click.IntRange(0, 100), default=3, show_default=True,
              help="Untimed calls per side before the first round.")
@click.option("--timeout", type=click.FloatRange(0.1, 3600.0), default=120.0,
              show_default=True,
              help="Seconds the candidate may go without progress before it is killed.")
@click.option("--backend", type=click.Choice(["auto", "pycuda", "torch"]),
              default="auto", show_default=True,
              help="GPU library for memory, streams and events (auto: pycuda, else torch).")
@click.option("--no-baseline", is_flag=True, help="Do not time the task's baseline.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write the trusted per-shape runs here (the `cake calibrate` format).")
@click.option("--fake", "fake", default=None, hidden=True, metavar="BEHAVIOUR|sim",
              help="Run on FakeDevice: a named fake kernel (cake_core/run/fake.py) or the "
                   "CPU simulator; for testing the runner without a GPU.")
@click.option("--gpu", hidden=True, help="Hardware-table GPU for the roofline floors.")
def bench(kernel: str, task_name: str, shapes: tuple[str, ...], seeds: int, rounds: int,
          calls: int, warmup: int, timeout: float, backend: str, no_baseline: bool, fmt: str,
          output: str | None, fake: str | None, gpu: str | None) -> None:
    """Check KERNEL on the GPU and time it against the task's baseline.

    Reports per shape: correct?, max abs/rel error, time, baseline time, % of the
    baseline's speed, TFLOP/s and flags; findings print as `cake check` prints them.
    """
    from cake_core.run.protocol import TimingConfig
    from cake_core.run.runner import BenchOptions

    if fake is not None:
        backend = "fake-sim" if fake == "sim" else "fake"
    opts = BenchOptions(
        shapes=_shapes(shapes), seeds=tuple(range(seeds)),
        timing=TimingConfig(warmup, rounds, calls, True), timeout=timeout, backend=backend,
        baseline=not no_baseline, fake_behaviour=fake or "correct", gpu=gpu)
    outcome = execute(kernel, task_name, opts, fmt)
    if output:
        write_runs(outcome.report, output)
        if fmt == "text":
            n = len(outcome.report.calibration_runs())
            click.echo(f"wrote {n} trusted run{'s' if n != 1 else ''} to {output}")
    sys.exit(0 if outcome.passed else 1)
