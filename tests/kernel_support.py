"""What the kernel tests ask of the toolchain, each asked one way: does nvcc build a kernel
clean, and does its lowered CUDA compute the task under CPU emulation."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cake_cli.main import main
from cake_core.run.protocol import TimingConfig
from cake_core.run.runner import EMULATE, BenchOptions, bench
from cake_core.tasks import Shape, Task


def assert_builds_clean(path: Path) -> None:
    """`cake compile` succeeds with no spills and no serialized wgmmas (CK604)."""
    out = CliRunner().invoke(main, ["compile", str(path)])
    assert out.exit_code == 0, out.output
    assert "spills 0 B stores / 0 B loads" in out.output, out.output
    assert "CK604" not in out.output, out.output


def assert_emulates(path: Path, task: Task, dims: dict[str, int],
                    seeds: tuple[int, ...] = (0, 1)) -> None:
    """The lowered kernel, built for the CPU, matches `task`'s reference at `dims` under
    each completion-order seed."""
    opts = BenchOptions(shapes=[Shape(dims)], seeds=seeds, timing=TimingConfig(enabled=False),
                        backend=EMULATE, baseline=False, emulate_seed=0)
    outcome = bench(path, None, task, opts)
    assert outcome.passed, outcome.report.to_json({})
