"""The cost model's verdict on a rewrite: predicted time before and after.

A tactic reports it in `TacticResult.params["predicted"]` so that a person choosing a
code action, or an agent ranking moves, sees what the model expects without running
anything.  Dims are the headline shape of the task that lists the kernel (the shape its
score weighs most); a kernel no task lists is priced at 4096 per dim (clamped to a
declared `max`, rounded up to `multiple_of`), and the result says which one was used.
Both sides are priced on the same GPU whenever it can run both.
"""

from __future__ import annotations

import functools
from typing import Any

from cake_core.diagnostics.model import TextEdit
from cake_core.hardware import default_gpu
from cake_core.ir.kernel import Kernel
from cake_core.rewrite import check_edited
from cake_core.source import SourceFile

DEFAULT_EXTENT = 4096


@functools.cache
def _tasks() -> tuple[Any, ...]:
    # start-up: `cake check` loads this module with the tactics; tasks import numpy (~45 ms)
    from cake_core.tasks import TaskError, load_task, task_names

    out = []
    for name in task_names():
        try:
            out.append(load_task(name))
        except TaskError:
            continue
    return tuple(out)


def headline_dims(kernel: Kernel, source: SourceFile) -> tuple[dict[str, int], str]:
    """The dims to price `kernel` at, and where they come from."""
    for task in _tasks():
        entry = task.entry(kernel.name, source.path)
        if entry is None:
            continue
        shapes = task.shapes_for(entry, sim=False)
        if shapes:
            label = shapes[0].label or "first"
            return dict(shapes[0].dims), f"task {task.name} ({label} shape)"
    dims = {}
    for name, d in kernel.dims.items():
        v = DEFAULT_EXTENT if d.max is None else min(DEFAULT_EXTENT, d.max)
        m = max(1, d.multiple_of)
        dims[name] = -(-v // m) * m
    return dims, f"default ({DEFAULT_EXTENT} per dim)"


def verified_rewrite(kernel: Kernel, source: SourceFile, edits: tuple[TextEdit, ...]
                     ) -> tuple[str, dict[str, Any]] | None:
    """The edited text and its predicted cost when it checks without errors, else None.

    One check serves both questions (as `cake_core.rewrite.verified` would answer the
    first), so offering a move costs a single re-check of the file.
    """
    res = check_edited(source, edits)
    if res.errors or res.program is None:
        return None
    after = next((k for k in res.program.kernels if k.name == kernel.name), None)
    return res.source.text, predicted(kernel, source, after)


def predicted(kernel: Kernel, source: SourceFile, after_k: Kernel | None) -> dict[str, Any]:
    """Before/after predicted time of `kernel` and of its rewrite `after_k`."""
    # start-up: `cake check` loads this module with the tactics; the cost model (~40 ms) loads
    # when a tactic prices a move
    from cake_core.cost.model import CostError, predict

    dims, origin = headline_dims(kernel, source)
    out: dict[str, Any] = {"dims": dims, "dims_from": origin}
    if after_k is None:
        out["error"] = "the rewrite has no kernel of that name"
        return out
    # one GPU for both sides when it runs both (a retargeted kernel is compared on the
    # original's GPU, or on the new one's), each on its own GPU otherwise
    attempts = [default_gpu(kernel.arch), default_gpu(after_k.arch), None]
    error = ""
    for gpu in attempts:
        try:
            before = predict(kernel, dims, gpu)
            after = predict(after_k, dims, gpu)
            break
        except CostError as exc:
            error = str(exc)
    else:
        out["error"] = error
        return out
    out.update({"gpu_before": before.gpu, "gpu_after": after.gpu,
                "before_us": before.seconds * 1e6, "after_us": after.seconds * 1e6,
                "speedup": before.seconds / after.seconds if after.seconds > 0 else None,
                "bottleneck_before": before.bottleneck, "bottleneck_after": after.bottleneck})
    return out
