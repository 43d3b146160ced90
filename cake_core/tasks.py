"""Tasks: what a kernel must compute, how to feed it, and how to judge its output.

A task is a Python module that defines `TASK = Task(...)`: the kernel entries that
implement it (a .cake file, relative to the task file, and a kernel name each), a seeded input
generator, a numpy reference, the shapes to test (weighted, the headline first), small
shapes for the simulator (ragged edges included), tolerances per output dtype, and the
baseline GPU timing compares against.  A task is named by its file's stem and found in
the tasks CAKE ships (`cake_core.shipped.TASKS_DIR`), then in `./examples/tasks/`, where a
user keeps their own; any task file can also be given by path.  Tasks of one family share
code through helper modules beside them, named with a leading `_` so that they are not
tasks (`examples/tasks/_attention.py`): the task's folder is on the import path while it
loads.

Tasks are trusted code written by people, and only people write them: `load_task`
imports the module by file path, which is exactly what must never happen to kernel text
(.cake files are parsed, never executed).  Agents write kernels against a task; they
never write or edit tasks, which is what keeps the reference honest.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cake_core.shipped import TASKS_DIR

#: Where a user's own tasks are looked for by name, after the shipped ones.
LOCAL_TASKS_DIR = Path("examples") / "tasks"

Arrays = dict[str, np.ndarray]
Dims = Mapping[str, int]


class TaskError(Exception):
    """A task that cannot be found or loaded, or does not define TASK correctly."""


@dataclass(frozen=True)
class Shape:
    """One problem size: dims by name and a weight in the task's score."""

    dims: Mapping[str, int]
    weight: float = 1.0
    label: str = ""

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims.items())


@dataclass(frozen=True)
class Tolerance:
    """`|got - want| <= atol + rtol * |want|` elementwise."""

    atol: float
    rtol: float


@dataclass(frozen=True)
class KernelEntry:
    """A kernel that implements the task.

    `source` is relative to the task file (`load_task` records the file's folder in
    `base`), so a task and its kernels can be installed or copied anywhere together.
    `params` maps the task's tensor names to the kernel's parameter names where they
    differ (`{"B": "W"}`); `shapes` / `sim_shapes` replace the task's when the kernel only
    covers part of the problem space (a small-M GEMM).
    """

    source: str
    kernel: str
    params: Mapping[str, str] = field(default_factory=dict)
    shapes: tuple[Shape, ...] = ()
    sim_shapes: tuple[Shape, ...] = ()
    base: Path = Path()

    @property
    def path(self) -> Path:
        return self.base / self.source


@dataclass(frozen=True)
class Comparison:
    """How one output compares with the reference."""

    passed: bool
    max_abs: float
    max_rel: float
    bad: int
    first_bad: tuple[int, ...] | None = None
    got: float | None = None
    want: float | None = None
    detail: str = ""


Compare = Callable[[str, np.ndarray, np.ndarray, Arrays, Dims], Comparison]


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    kernels: tuple[KernelEntry, ...]
    inputs: Callable[[Dims, np.random.Generator], Arrays]
    """Seeded input generator: values already rounded to each tensor's dtype."""
    reference: Callable[[Arrays, Dims], Arrays]
    """The expected outputs, by task tensor name."""
    outputs: tuple[str, ...]
    shapes: tuple[Shape, ...]
    """GPU shapes with weights, headline first."""
    sim_shapes: tuple[Shape, ...]
    """Small shapes the simulator runs in seconds, ragged edges included."""
    tolerances: Mapping[str, Tolerance]
    """By output dtype name ("bf16", "f16", "f32", "i32")."""
    baseline: str
    """What GPU timing is paired with (the library call a kernel must beat)."""
    compare: Compare | None = None
    """A custom comparison (e.g. argmin outputs that may differ on near-ties)."""
    fixed: Mapping[str, int] = field(default_factory=dict)
    """Sizes the task's kernels fix as constants (attention's head dim `D`): not dims of a
    shape, but the key that tells a family's tasks apart, so a dispatcher over several
    tasks' portfolios (`cake runs dispatch`) can choose by them."""
    path: str = ""

    def entry(self, kernel: str, source: str | Path | None = None) -> KernelEntry | None:
        """The entry for a kernel: by source file and name, else by name alone."""
        if source is not None:
            src = Path(source).resolve()
            for e in self.kernels:
                if e.path.resolve() == src and e.kernel == kernel:
                    return e
        return next((e for e in self.kernels if e.kernel == kernel), None)

    def shapes_for(self, entry: KernelEntry | None, *, sim: bool) -> tuple[Shape, ...]:
        if entry is not None and (entry.sim_shapes if sim else entry.shapes):
            return entry.sim_shapes if sim else entry.shapes
        return self.sim_shapes if sim else self.shapes

    def judge(self, name: str, got: np.ndarray, want: np.ndarray, inputs: Arrays, dims: Dims,
              dtype: str) -> Comparison:
        if self.compare is not None:
            return self.compare(name, got, want, inputs, dims)
        tol = self.tolerances.get(dtype, Tolerance(0.0, 0.0))
        return allclose(got, want, tol)


def allclose(got: np.ndarray, want: np.ndarray, tol: Tolerance) -> Comparison:
    """Elementwise tolerance check; NaN or a shape mismatch fails."""
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return Comparison(False, float("inf"), float("inf"), int(w.size),
                          detail=f"shape {g.shape} != reference {w.shape}")
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - w)
        err = np.where(np.isnan(g) & ~np.isnan(w), np.inf, err)
        rel = err / np.maximum(np.abs(w), 1e-30)
        bad = ~(err <= tol.atol + tol.rtol * np.abs(w))
    n = int(bad.sum())
    max_abs = float(np.nanmax(err)) if err.size else 0.0
    finite = rel[np.abs(w) > tol.atol] if err.size else rel
    max_rel = float(np.nanmax(finite)) if finite.size else 0.0
    if n == 0:
        return Comparison(True, max_abs, max_rel, 0)
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return Comparison(False, max_abs, max_rel, n, first, float(g[first]), float(w[first]))


def as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """Values rounded to `dtype` (bf16, f16, e4m3, ...) as float32: what the kernel sees."""
    from cake_core.ir.types import DTYPE_NAMES
    from cake_core.sim.dtypes import round_to

    return round_to(np.asarray(x, dtype=np.float32), DTYPE_NAMES[dtype])


def _task_dirs() -> list[Path]:
    """The folders tasks are looked up in by name, in order (one, in a checkout's root)."""
    dirs = [TASKS_DIR]
    if LOCAL_TASKS_DIR.is_dir() and LOCAL_TASKS_DIR.resolve() != TASKS_DIR.resolve():
        dirs.append(LOCAL_TASKS_DIR)
    return dirs


def task_names() -> list[str]:
    return sorted({p.stem for d in _task_dirs() for p in d.glob("*.py")
                   if not p.name.startswith("_")})


def _find_task(name: str) -> Path | None:
    return next((d / f"{name}.py" for d in _task_dirs() if (d / f"{name}.py").is_file()), None)


def load_task(path_or_name: str | Path) -> Task:
    """Import a task module by file path (or by name, see the module docstring); return TASK."""
    p: Path | None = Path(path_or_name)
    if p is not None and not p.suffix:
        if p.name != str(path_or_name) or p.name in ("", ".", ".."):
            raise TaskError(f"task name {str(path_or_name)!r} is not a plain name: give a "
                            "task's name, or the path of its task file (.py)")
        p = _find_task(p.name)
    if p is None or not p.is_file():
        known = ", ".join(task_names()) or "none"
        where = " and ".join(d.as_posix() for d in _task_dirs())
        raise TaskError(f"no task {str(path_or_name)!r} (tasks in {where}: {known})")
    mod_name = f"cake_task_{p.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot import {p}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    # a task may import helper modules beside it (`_attention.py`: a `_` name is no task)
    folder = str(p.parent.resolve())
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise TaskError(f"{p} failed to import: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(folder)
    task = getattr(module, "TASK", None)
    if not isinstance(task, Task):
        raise TaskError(f"{p} does not define TASK = Task(...)")
    if not task.path:
        object.__setattr__(task, "path", p.as_posix())
    for entry in task.kernels:
        object.__setattr__(entry, "base", p.parent)
    return task
