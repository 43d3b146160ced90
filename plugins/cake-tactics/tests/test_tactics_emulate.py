"""Every rewrite the tactics offer, lowered to CUDA and run under emulation.

`test_tactics.py` checks that each offered variant verifies; verifying says the rewrite is
well-formed, not that the kernel still computes its task.  Here each variant goes through
`cake run --emulate`'s path (lower, build for the CPU, the runner's checks against the
task's reference, both completion orders) on two of its task's small shapes: the first,
and a ragged one where the kernel's dims allow it.  Every variant of a (kernel, tactic)
pair runs before the test fails, so one run lists them all.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cake_tactics import plugin
from tactics_support import KERNELS, ROOT, applies, checked, offered_variants

from cake_core.emulate.build import host_compiler_present
from cake_core.run.protocol import TimingConfig
from cake_core.run.runner import EMULATE, BenchOptions, bench
from cake_core.tasks import Shape, Task, load_task

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")]

#: The kernels written for the tactic tests are in no task; each computes the named task's output.
UNLISTED = {"gemm_mbarrier_sm90": "gemm_bf16", "gemm_one_role_sm90": "gemm_bf16",
            "gemm_sm90_cluster": "gemm_bf16", "gemm_sm90_expert": "gemm_bf16",
            "attention_causal_noskip_sm90": "attention_fwd_causal"}


@functools.cache
def _task_for(stem: str) -> Task:
    """The shipped task that lists the kernel, else the one UNLISTED names."""
    for path in sorted((ROOT / "examples" / "tasks").glob("[!_]*.py")):
        task = load_task(str(path))
        if any(e.kernel == stem for e in task.kernels):
            return task
    assert stem in UNLISTED, f"no task lists {stem}: name one in UNLISTED"
    return load_task(UNLISTED[stem])


def _allowed(dims: dict[str, int], kernel: Any) -> bool:
    return all(v % d.multiple_of == 0 and (d.max is None or v <= d.max)
               for name, v in dims.items() if (d := kernel.dims.get(name)) is not None)


def _shapes(path: Path, task: Task) -> list[Shape]:
    """The task's first small shape and its first ragged one the kernel's dims allow (the
    second shape when none does)."""
    _, res = checked(path)
    kernel = res.program.kernels[0]
    shapes = [s for s in task.shapes_for(task.entry(kernel.name, path), sim=True)
              if _allowed(dict(s.dims), kernel)]
    assert shapes, f"no small shape of {task.name} fits {path.name}'s dims"
    ragged = [s for s in shapes[1:] if "ragged" in s.label]
    return [shapes[0], *(ragged or shapes[1:])[:1]]


def _emulate(text: str, name: str, task: Task, shapes: list[Shape]) -> list[str]:
    """What went wrong running `text` on `shapes`, one line per problem."""
    opts = BenchOptions(shapes=shapes, seeds=(0, 1), backend=EMULATE, baseline=False,
                        timing=TimingConfig(enabled=False))
    with tempfile.TemporaryDirectory(prefix="cake-tactic-emu-") as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        outcome = bench(path, None, task, opts)
    problems = [f"{s.dims_text}: {s.status}" + (f" ({s.error})" if s.error else "")
                for s in outcome.report.shapes if not s.correct]
    problems += [f"{d.code}: {d.message}" for d in outcome.diagnostics
                 if d.severity.value == "error"]
    if len(outcome.report.shapes) != len(shapes):
        problems.append(f"{len(outcome.report.shapes)} of {len(shapes)} shapes ran")
    return problems


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("tactic", plugin.tactics, ids=lambda t: t.name)
def test_every_offered_rewrite_computes_its_task_under_emulation(path: Path, tactic) -> None:
    if not applies(tactic, path):
        pytest.skip(f"{tactic.name} does not apply to {path.name}")
    task = _task_for(path.stem)
    shapes = _shapes(path, task)
    failed = {}
    ran = 0
    for v in offered_variants(tactic, path):
        ran += 1
        problems = _emulate(v.text, path.name, task, shapes)
        if problems:
            params = {k: p for k, p in v.params.items() if k != "predicted"}
            failed[str(params)] = problems[:4]
    if not ran:
        pytest.skip(f"{tactic.name} offers no rewrite of {path.name}")
    assert not failed, "\n".join(f"{tactic.name} {p} on {path.name}:\n  " + "\n  ".join(ps)
                                 for p, ps in failed.items())
