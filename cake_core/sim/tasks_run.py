"""A kernel against a task, in the simulator: per shape and schedule, pass or fail.

This is `cake run --sim`: generate the task's inputs for each shape, simulate under each
schedule, compare every output with the reference.  A wrong output becomes a CK507
finding at the op that wrote the first wrong element (or at the kernel when nothing
wrote it), so the agent's repair loop sees it in the same stream as every other finding.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, sort_diagnostics
from cake_core.sim.engine import SimResult, check_tensor_sizes, launch_dims, simulate
from cake_core.sim.program import SimKernel, SimSetupError
from cake_core.sim.schedule import schedules as make_schedules
from cake_core.tasks import Comparison, KernelEntry, Task


@dataclass
class ScheduleOutcome:
    schedule: str
    passed: bool
    comparisons: dict[str, Comparison]
    seconds: float
    findings: int


@dataclass
class ShapeReport:
    dims: dict[str, int]
    label: str = ""
    outcomes: list[ScheduleOutcome] = field(default_factory=list)
    blocks: int = 0
    seconds: float = 0.0
    error: str | None = None
    """Why the shape could not run (bad dims, the kernel cannot take it)."""

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.outcomes) and all(o.passed for o in self.outcomes)

    @property
    def max_abs(self) -> float:
        return max((c.max_abs for o in self.outcomes for c in o.comparisons.values()),
                   default=0.0)

    @property
    def max_rel(self) -> float:
        return max((c.max_rel for o in self.outcomes for c in o.comparisons.values()),
                   default=0.0)

    @property
    def dims_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims.items())


@dataclass
class TaskRunReport:
    task: str
    kernel: str
    path: str
    shapes: list[ShapeReport]
    diagnostics: list[Diagnostic]

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.shapes) and not any(
            d.severity.value == "error" for d in self.diagnostics)


def run_task(task: Task, sk: SimKernel, *, shapes: Sequence[Mapping[str, int]] | None = None,
             n_schedules: int = 2, seed: int = 0, entry: KernelEntry | None = None,
             blocks: list[tuple[int, ...]] | None = None) -> TaskRunReport:
    """Simulate `sk` on each shape (the task's simulator shapes by default)."""
    entry = entry or task.entry(sk.name, sk.path)
    rename = dict(entry.params) if entry is not None else {}
    _check_params(task, sk, rename)
    labelled: list[tuple[dict[str, int], str]]
    if shapes is None:
        labelled = [(dict(s.dims), s.label) for s in task.shapes_for(entry, sim=True)]
    else:
        labelled = [(dict(s), "") for s in shapes]
    reports: list[ShapeReport] = []
    diags: list[Diagnostic] = []
    roles = list(sk.kernel.roles)
    for dims, label in labelled:
        rep = ShapeReport(dims, label)
        reports.append(rep)
        t0 = time.perf_counter()
        try:
            launch_dims(sk, dims)
            check_tensor_sizes(sk, dims)  # before the task makes inputs of that size
        except SimSetupError as exc:
            rep.error = str(exc)
            continue
        data = task.inputs(dims, np.random.default_rng(seed))
        want = task.reference(data, dims)
        kernel_inputs = {rename.get(k, k): v for k, v in data.items()}
        for sched in make_schedules(n_schedules, seed, roles):
            try:
                res = simulate(sk, dims, kernel_inputs, schedule=sched, blocks=blocks)
            except SimSetupError as exc:
                rep.error = str(exc)
                break
            rep.blocks = res.blocks
            comps = {}
            for name in task.outputs:
                kname = rename.get(name, name)
                dtype = sk.tensor_params()[kname].dtype.value
                got = res.outputs[kname]
                c = task.judge(name, got, want[name], data, dims, dtype)
                comps[name] = c
                if not c.passed:
                    diags.append(_mismatch(res, sk, kname, c, rep.dims_text))
            errors = sum(d.severity.value == "error" for d in res.diagnostics)
            rep.outcomes.append(ScheduleOutcome(res.schedule, all(c.passed for c in comps.values()),
                                                comps, res.seconds, errors))
            diags.extend(res.diagnostics)
        rep.seconds = time.perf_counter() - t0
    return TaskRunReport(task.name, sk.name, sk.path, reports, _dedupe(diags))


def _check_params(task: Task, sk: SimKernel, rename: dict[str, str]) -> None:
    params = sk.tensor_params()
    missing = [n for n in task.outputs if rename.get(n, n) not in params]
    if missing:
        raise SimSetupError(
            f"kernel `{sk.name}` has no parameter for the task's output(s) "
            f"{', '.join(missing)} (its tensors: {', '.join(params)})")


def _mismatch(res: SimResult, sk: SimKernel, tensor: str, c: Comparison, dims: str
              ) -> Diagnostic:
    where = sk.kernel.name_span
    how = "nothing wrote it"
    if c.first_bad is not None:
        w = res.writer(tensor, c.first_bad)
        if w >= 0:
            where = sk.ops[w].span
            how = "written by this op"
    idx = ", ".join(str(i) for i in c.first_bad) if c.first_bad is not None else "?"
    got = "" if c.got is None else f" is {c.got:g}, the reference {c.want:g}"
    msg = (f"`{tensor}` differs from the reference at {c.bad} element(s) for {dims}: "
           f"`{tensor}[{idx}]`{got} ({how})")
    notes = [f"max abs error {c.max_abs:.3g}, max rel error {c.max_rel:.3g} "
             f"(schedule {res.schedule})"]
    if c.detail:
        notes.append(c.detail)
    return codes.SIM_WRONG_RESULT.at(
        where, msg, notes=notes,
        data={"tensor": tensor, "dims": res.dims, "bad": c.bad, "max_abs": c.max_abs,
              "max_rel": c.max_rel, "first_bad": list(c.first_bad or ()),
              "schedule": res.schedule}).with_path(sk.path)


def _dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple[object, ...]] = set()
    out = []
    for d in diags:
        # a race an elected arrival lets through is one finding at the arrival, whichever
        # refill each schedule saw first
        partners = () if (d.data or {}).get("elected_arrival") else tuple(
            r.span.start.offset for r in d.related)
        key = (d.code, d.span.start.offset, d.span.end.offset, partners)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return sort_diagnostics(out)
