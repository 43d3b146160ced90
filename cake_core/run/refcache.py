"""A shape's inputs and numpy reference, kept on disk for the next candidate on that shape.

Inputs are a pure function of the task, the dims and the seed (`Task.inputs` draws them from
`default_rng(seed)`), and the reference a pure function of the inputs, so every candidate
of a task on a shape gets the same ones.  At a large shape they cost far more host time
than the GPU work (the k-means headline shape: tens of seconds of input drawing and a
reference of half a TFLOP in float64), and a check that runs three variants of a kernel on
it pays that three times.  With a cache directory the first candidate stores them and the
others load them.

The key is the SHA-256 of the task file's bytes, the dims, the seed and a format version,
so an edited task never reads an old answer.  The cache is host files the kernel cannot
reach; what a candidate sees does not change (the same seed gave it the same inputs
before).  Perturbed inputs (protocol rule 5) are random per call and never cached.  A
damaged or unwritable entry only costs the time of computing it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from cake_core.tasks import Arrays, Task

FORMAT = "cake-refs/1"


class ReferenceCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def key(self, task: Task, dims: Mapping[str, int], seed: int) -> str:
        h = hashlib.sha256()
        try:
            h.update(Path(task.path).read_bytes())
        except OSError:
            h.update(task.name.encode())  # no file (a task built in code): its name
        h.update(json.dumps({"dims": dict(sorted(dims.items())), "seed": seed,
                             "format": FORMAT}).encode())
        return h.hexdigest()

    def _file(self, task: Task, dims: Mapping[str, int], seed: int) -> Path:
        return self.root / f"{task.name}-{self.key(task, dims, seed)[:32]}.npz"

    def load(self, task: Task, dims: Mapping[str, int], seed: int) -> tuple[Arrays, Arrays] | None:
        """(inputs, reference) by task name, or None when not cached (or unreadable)."""
        path = self._file(task, dims, seed)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                host: Arrays = {}
                want: Arrays = {}
                for name in z.files:
                    kind, _, tname = name.partition("/")
                    value = z[name]
                    (host if kind == "in" else want)[tname] = value[()] if value.ndim == 0 \
                        else value
        except (OSError, ValueError):
            return None
        return host, want

    def store(self, task: Task, dims: Mapping[str, int], seed: int, host: Arrays,
              want: Arrays) -> None:
        path = self._file(task, dims, seed)
        arrays = {f"in/{k}": np.asarray(v) for k, v in host.items()}
        arrays.update({f"out/{k}": np.asarray(v) for k, v in want.items()})
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            np.savez(tmp, **arrays)  # type: ignore[arg-type]
            tmp.replace(path)  # atomic: a reader never sees half a file
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()


__all__ = ["FORMAT", "ReferenceCache"]
