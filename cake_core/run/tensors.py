"""What the runner must allocate for one launch, and how host values become device bytes.

A kernel's tensors are described once, as `TensorSpec`s, whether they come from the
lowering's metadata (a real launch) or from the checked IR (a fake or simulated launch),
so the verification protocol never needs to know which.  Host arrays follow the tasks'
convention: float values already rounded to the tensor's dtype, held as float32; the device
holds the storage bits (bf16 as 16-bit words), converted here with the simulator's exact
conversions so a value means the same thing on the CPU and on the GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cake_core.ir.types import DType, TensorType
from cake_core.sim.dtypes import POISON_BYTE, STORAGE, decode, encode

__all__ = ["POISON_BYTE", "RunSetupError", "TensorSpec", "eval_sym_json", "from_storage",
           "poisoned_mask", "specs_from_kernel", "specs_from_meta", "to_storage"]


class RunSetupError(Exception):
    """A shape or an input the kernel cannot take: reported for the shape, not a crash."""


@dataclass(frozen=True)
class TensorSpec:
    """One tensor parameter: its kernel name, dtype and shape expressions."""

    name: str
    dtype: DType
    shape: tuple[Any, ...]
    """`sym_json` expressions (ints, {"dim": name}, {"op": ..., "args": [...]})."""
    written: bool = False

    def dims_shape(self, dims: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(eval_sym_json(e, dims) for e in self.shape)

    def nbytes(self, dims: Mapping[str, int]) -> int:
        return int(np.prod(self.dims_shape(dims), dtype=np.int64)) * self.dtype.bytes


def eval_sym_json(expr: Any, dims: Mapping[str, int]) -> int:
    """The value of a launch-time expression written by the lowering's `sym_json`."""
    if isinstance(expr, bool):
        raise RunSetupError(f"not a size expression: {expr!r}")
    if isinstance(expr, int):
        return expr
    if isinstance(expr, dict) and "dim" in expr:
        name = str(expr["dim"])
        if name not in dims:
            raise RunSetupError(f"the shape gives no value for dim {name}")
        return int(dims[name])
    if isinstance(expr, dict) and "op" in expr:
        a, b = (eval_sym_json(x, dims) for x in expr["args"])
        op = expr["op"]
        ops = {"+": a + b, "-": a - b, "*": a * b, "min": min(a, b), "max": max(a, b)}
        if op in ops:
            return ops[op]
        if b == 0:
            raise RunSetupError(f"division by zero in a size expression ({op})")
        if op == "//":
            return a // b
        if op == "%":
            return a % b
        if op == "cdiv":
            return -(-a // b)
        raise RunSetupError(f"unknown operator {op!r} in a size expression")
    raise RunSetupError(f"not a size expression: {expr!r}")


def specs_from_meta(meta: Mapping[str, Any]) -> list[TensorSpec]:
    """Tensor parameters of a lowered kernel, in launcher order."""
    out = []
    for p in meta["params"]:
        if p["kind"] == "tensor":
            out.append(TensorSpec(p["name"], DType(p["dtype"]), tuple(p["shape"]),
                                  bool(p.get("written", False))))
    return out


def specs_from_kernel(kernel: Any) -> list[TensorSpec]:
    """Tensor parameters of a checked IR kernel (for fake and simulated launches)."""
    # start-up: every worker imports this module, and only fake and simulated kernels
    # need the lowering (~30 ms)
    from cake_core.lower.host import sym_json

    out = []
    for p in kernel.params:
        t = p.value.type
        if isinstance(t, TensorType):
            out.append(TensorSpec(p.name, t.dtype, tuple(sym_json(e) for e in t.shape)))
    return out


def to_storage(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Host values -> the contiguous storage array the device holds."""
    return np.ascontiguousarray(encode(np.asarray(values), dtype))


def from_storage(raw: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Device bytes (uint8) -> host values of `shape`."""
    bits = np.ascontiguousarray(raw).view(STORAGE[dtype]).reshape(shape)
    return decode(bits, dtype)


def poisoned_mask(raw: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Elements whose every byte still holds the poison: nothing wrote them."""
    b = np.ascontiguousarray(raw).reshape(-1, dtype.bytes)
    return np.all(b == POISON_BYTE, axis=1).reshape(shape)
