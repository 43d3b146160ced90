"""Launches without a task: small default dims and random inputs for any kernel.

For checking synchronisation (races, deadlocks, parity) the numbers do not matter, only
that every tensor holds some; tasks are what judge the numbers.
"""

from __future__ import annotations

import numpy as np

from cake_core.ir.symbolic import Dim, is_sm_count
from cake_core.ir.types import TensorType
from cake_core.sim.engine import launch_dims, make_tensors
from cake_core.sim.program import SimKernel


def default_dims(sk: SimKernel, size: int = 128) -> dict[str, int]:
    """Every dim the launch needs: `size` rounded up to its multiple, capped at its max."""
    out: dict[str, int] = {}
    for p in sk.kernel.params:
        if not isinstance(p.value.type, TensorType):
            continue
        for e in p.value.type.shape:
            for a in e.atoms():
                if isinstance(a, Dim):
                    out[a.name] = _fit(size, a)
    for g in sk.kernel.grid:
        for a in g.atoms():
            if isinstance(a, Dim) and a.name not in out and not is_sm_count(a):
                out[a.name] = _fit(size, a)
    return out


def _fit(size: int, d: Dim) -> int:
    v = -(-size // d.multiple_of) * d.multiple_of
    if d.max is not None and v > d.max:
        v = max(d.max // d.multiple_of * d.multiple_of, d.multiple_of)
    return v


def random_inputs(sk: SimKernel, dims: dict[str, int], seed: int = 0,
                  skip: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Standard-normal floats (small integers for int tensors) for every tensor but `skip`."""
    rng = np.random.default_rng(seed)
    shapes = {n: t.data.shape for n, t in make_tensors(sk, launch_dims(sk, dims), {}).items()}
    out: dict[str, np.ndarray] = {}
    for name, t in sk.tensor_params().items():
        if name in skip:
            continue
        if t.dtype.is_float:
            out[name] = rng.standard_normal(shapes[name]).astype(np.float32)
        else:
            out[name] = rng.integers(0, 8, size=shapes[name]).astype(np.int32)
    for name in sk.scalar_params():
        out[name] = 1.0  # type: ignore[assignment]
    return out
