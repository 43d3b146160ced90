"""What the attention forward tasks share: their inputs and their float64 reference.

Not a task (the leading `_`): the task files beside it import it, one per head dim and
masking (`from _attention import inputs_for, reference_for`).  Q, K (BH, S, D) and O
(BH, S, D) are row-major; V comes transposed, Vt (BH, D, S).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from cake_core.tasks import as_dtype

Arrays = dict[str, np.ndarray]


def inputs_for(d: int) -> Callable[[Mapping[str, int], np.random.Generator], Arrays]:
    """Standard-normal bf16 Q, K and Vt at head dim `d`."""
    def inputs(dims: Mapping[str, int], rng: np.random.Generator) -> Arrays:
        bh, s = dims["BH"], dims["S"]
        return {"Q": as_dtype(rng.standard_normal((bh, s, d)), "bf16"),
                "K": as_dtype(rng.standard_normal((bh, s, d)), "bf16"),
                "Vt": as_dtype(rng.standard_normal((bh, d, s)), "bf16")}

    return inputs


def reference_for(d: int, causal: bool = False
                  ) -> Callable[[Arrays, Mapping[str, int]], Arrays]:
    """O = softmax(Q @ K.T / sqrt(d)) @ V in float64, rounded to bf16 once at the end;
    `causal`: query q attends to keys k <= q only."""
    def reference(x: Arrays, dims: Mapping[str, int]) -> Arrays:
        q = x["Q"].astype(np.float64)
        k = x["K"].astype(np.float64)
        v = np.swapaxes(x["Vt"].astype(np.float64), 1, 2)
        s = q @ np.swapaxes(k, 1, 2) / np.sqrt(d)
        if causal:
            n = s.shape[-1]
            s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)   # key <= query
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        o = (p @ v) / p.sum(axis=-1, keepdims=True)
        return {"O": as_dtype(o, "bf16")}

    return reference
