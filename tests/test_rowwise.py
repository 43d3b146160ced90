"""The row-wise examples (RMSNorm, softmax) compute what their tasks say.

Each kernel is simulated against its task's numpy reference on the task's simulated
shapes (ragged M included), emulated on the CPU through the lowered C++ where a host
compiler exists, and compiled with nvcc to check it spills nothing.  Mutants of the
kernels (a wrong mean, a missing log2(e), a dropped rescale) must fail the same reference,
so these tests can fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.lower.build import build_source
from cake_core.lower.toolchain import find_nvcc, find_toolchain
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import TaskRunReport, run_task
from cake_core.source import SourceFile
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "examples" / "tasks"

#: (task, example stem); the kernel is named as the file.
KERNELS = [("rmsnorm", "rmsnorm_sm90"), ("rmsnorm", "rmsnorm_sm80"),
           ("softmax", "softmax_sm90"), ("softmax", "softmax_sm90_online")]
IDS = [k[1] for k in KERNELS]

#: Rows per block of every row-wise example: an M that is not a multiple is ragged.
ROWS_PER_BLOCK = 4


def _simulate(task_name: str, text: str, kernel: str, tmp_path: Path) -> TaskRunReport:
    """Simulate `text` (the example or a mutant of it) on the shapes of its task entry."""
    path = tmp_path / f"{kernel}.cake"
    path.write_text(text, encoding="utf-8")
    task = load_task(TASKS / f"{task_name}.py")
    (entry,) = [e for e in task.kernels if e.kernel == kernel]
    return run_task(task, SimKernel.from_file(path, kernel), n_schedules=2, entry=entry)


def _source(stem: str) -> str:
    return (ROOT / "examples" / f"{stem}.cake").read_text(encoding="utf-8")


@pytest.mark.parametrize(("task_name", "stem"), KERNELS, ids=IDS)
def test_example_checks_clean(task_name: str, stem: str) -> None:
    res = check_text(_source(stem), f"examples/{stem}.cake")
    assert res.diagnostics == []


@pytest.mark.parametrize(("task_name", "stem"), KERNELS, ids=IDS)
def test_simulated_against_reference(task_name: str, stem: str, tmp_path: Path) -> None:
    report = _simulate(task_name, _source(stem), stem, tmp_path)
    assert len(report.shapes) >= 2
    assert any(s.dims["M"] % ROWS_PER_BLOCK for s in report.shapes), "no ragged M tested"
    for s in report.shapes:
        assert s.error is None, s.error
        assert s.passed, s.dims
        assert len(s.outcomes) == 2


#: Each mutant: (task, stem, text replaced, replacement, what it breaks).
MUTANTS = [
    ("rmsnorm", "rmsnorm_sm90", "* (1.0 / D)", "* (2.0 / D)", "mean over half the count"),
    ("rmsnorm", "rmsnorm_sm90", "y = x * unsqueeze(r, 1) * w", "y = x * unsqueeze(r, 1)",
     "the gain dropped"),
    ("softmax", "softmax_sm90", "f32) * LOG2E", "f32)", "log2(e) not folded: base-2 softmax"),
    ("softmax", "softmax_sm90", "e * unsqueeze(1.0 / row_sum(e), 1)", "e",
     "not normalised"),
    ("softmax", "softmax_sm90_online", "l = l * exp2(m - mn) + row_sum",
     "l = l + row_sum", "the running sum is not rescaled when the max rises"),
]


@pytest.mark.parametrize(("task_name", "stem", "old", "new", "why"), MUTANTS,
                         ids=[m[4] for m in MUTANTS])
def test_mutant_fails_the_reference(task_name: str, stem: str, old: str, new: str, why: str,
                                    tmp_path: Path) -> None:
    text = _source(stem)
    assert text.count(old) == 1, f"the mutant's anchor {old!r} is not in {stem}"
    report = _simulate(task_name, text.replace(old, new), stem, tmp_path)
    assert not all(s.passed for s in report.shapes), f"{why}: the mutant passed"


ALIAS_LOOP = '''
BM, NC = 4, 1024
M = dim("M")
N = dim("N", multiple_of=NC)

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=4)
def rowmax(X: Tensor[f32, (M, N)], Y: Tensor[f32, (M,)]):
    m = row_max(load(X.tile((BM, NC), (block.x, 0))))
    for j in range(1, N // NC):
        BODY
    store(Y.tile((BM,), (block.x,)), m)
'''


def _codes(text: str) -> list[str]:
    return [d.code for d in check_text(text, "t.cake").diagnostics]


def test_carried_alias_is_reported_in_the_online_softmax_mutant() -> None:
    """`m = mn` for the carried max: the silent stale-max bug is found before any run."""
    text = _source("softmax_sm90_online").replace("m = maximum(m, mx)", "m = mn")
    assert _codes(text) == ["CK332"]


@pytest.mark.parametrize(("body", "want"), [
    # read in the loop, rebound by name: the next iteration reads the stale value
    ("mn = maximum(m, row_max(load(X.tile((BM, NC), (block.x, j)))))\n        m = mn",
     ["CK332"]),
    # an operation whose result is `m` carries it
    ("m = maximum(m, row_max(load(X.tile((BM, NC), (block.x, j)))))", []),
    ("mn = maximum(m, row_max(load(X.tile((BM, NC), (block.x, j)))))\n        m = mn + 0.0",
     []),
])
def test_carried_alias_rule(body: str, want: list[str]) -> None:
    assert _codes(ALIAS_LOOP.replace("BODY", body)) == want


def test_carried_alias_not_reported_when_only_read_after_the_loop() -> None:
    """`last = v` with `last` unread in the loop means the last iteration's value."""
    text = ALIAS_LOOP.replace("    m = row_max(", "    last = row_max(").replace(
        "BODY", "v = row_max(load(X.tile((BM, NC), (block.x, j))))\n        last = v").replace(
        "(block.x,)), m)", "(block.x,)), last)")
    assert _codes(text) == []


def test_carried_alias_suggested_copy_simulates(tmp_path: Path) -> None:
    """The rule's suggested copy (`m = mn + 0.0`) is a correct online softmax."""
    text = _source("softmax_sm90_online").replace("m = maximum(m, mx)", "m = mn + 0.0")
    report = _simulate("softmax", text, "softmax_sm90_online", tmp_path)
    assert all(s.passed for s in report.shapes)


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize(("task_name", "stem"), KERNELS, ids=IDS)
def test_emulated_against_reference(task_name: str, stem: str) -> None:
    r = CliRunner().invoke(main, ["run", str(ROOT / "examples" / f"{stem}.cake"), "--task",
                                  str(TASKS / f"{task_name}.py"), "--emulate"])
    assert r.exit_code == 0, r.output
    assert "shapes correct" in r.output and " NO " not in r.output, r.output


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.parametrize(("task_name", "stem"), KERNELS, ids=IDS)
def test_compiles_without_spills(task_name: str, stem: str, tmp_path: Path) -> None:
    rep = build_source(SourceFile(_source(stem), f"examples/{stem}.cake"),
                       toolchain=find_toolchain(), cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
    (k,) = rep.kernels
    r = k.resources
    assert r is not None
    assert (r.spill_stores, r.spill_loads, r.stack) == (0, 0, 0)
    assert r.registers is not None and r.registers <= 255
