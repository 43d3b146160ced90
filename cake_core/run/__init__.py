"""The GPU runner: run a lowered kernel on a real GPU under a verification contract.

`runner.bench` builds a kernel's shared library, runs it in a subprocess on each of a
task's shapes and seeds, checks its outputs against the task's reference (poisoned
outputs, inputs unchanged, candidate -> reference -> candidate, a re-check after timing),
times it against the task's baseline (warmup, L2 flush, CUDA events, median of round
medians) and flags times no GPU could produce.  `protocol.run_shape` is that contract for
one shape on any `Device`; `fake.FakeDevice` runs it without a GPU.  docs/running.md
explains every rule.

Nothing here imports a GPU library until a device is opened, so the package imports on
machines without CUDA.
"""

from __future__ import annotations

__all__: list[str] = []
