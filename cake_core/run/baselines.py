"""What a candidate's time is compared with: the library call the task names.

A baseline runs on the same device, on the same stream, in the same process and between
the same L2 flushes as the candidate, alternating with it round by round, so clock drift,
thermal state and co-tenants affect both alike.  The built-in ones use torch (cuBLAS for
GEMM); where torch is missing, or a task has no implementation here, the report carries the
task's own `baseline` description and no baseline time.

Baselines are chosen by task name from `TORCH_BASELINES`, a table in this module: a task
states in words what it is compared with, and the implementation of that sentence lives
here, in reviewed code.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from cake_core.ir.types import DType
from cake_core.run.device import Device
from cake_core.tasks import Arrays, Dims, Task


class PreparedBaseline(ABC):
    """A baseline with its inputs resident on the device, ready to launch repeatedly."""

    @abstractmethod
    def launch(self) -> None:
        """Enqueue one baseline call on the stream it was prepared for."""

    @abstractmethod
    def outputs(self) -> Arrays:
        """The last call's outputs as host values, by task name (synchronous)."""

    def scrub(self) -> None:  # noqa: B027 - optional hook
        """Overwrite the last call's outputs on the device with poison.

        The protocol scrubs after every baseline call it no longer needs, so a candidate
        that goes looking for the library's answer in device memory finds only 0xFF."""

    def release(self) -> None:  # noqa: B027 - optional hook
        """Free device memory."""


class Baseline(ABC):
    description: str = ""

    @abstractmethod
    def prepare(self, device: Device, stream: Any, inputs: Arrays, dims: Dims,
                dtypes: Mapping[str, DType]) -> PreparedBaseline:
        """`inputs` by task name (host values); `dtypes` gives each tensor's device dtype."""


# --- torch ---------------------------------------------------------------------------------
_TORCH_DTYPES = {DType.BF16: "bfloat16", DType.F16: "float16", DType.F32: "float32",
                 DType.I32: "int32"}


class _TorchPrepared(PreparedBaseline):
    def __init__(self, device: Device, stream: Any, fn: Any, tensors: dict[str, Any]) -> None:
        import torch  # optional dependency: only a timed torch baseline imports it

        self._torch = torch
        self._device = device
        handle = device.stream_handle(stream)
        self._stream = torch.cuda.ExternalStream(handle)
        self._fn = fn
        self._tensors = tensors
        self._out: dict[str, Any] = {}

    def launch(self) -> None:
        with self._torch.cuda.stream(self._stream):
            self._out = self._fn(self._tensors)

    def outputs(self) -> Arrays:
        self._device.synchronize()
        return {k: v.float().cpu().numpy() if v.is_floating_point() else v.cpu().numpy()
                for k, v in self._out.items()}

    def scrub(self) -> None:
        with self._torch.cuda.stream(self._stream):
            for v in self._out.values():
                v.view(-1).view(self._torch.uint8).fill_(0xFF)

    def release(self) -> None:
        self._tensors.clear()
        self._out = {}


class TorchBaseline(Baseline):
    """A torch expression over the task's tensors (inputs uploaded once, in device dtype)."""

    def __init__(self, description: str, fn: Any) -> None:
        self.description = description
        self._fn = fn

    def prepare(self, device: Device, stream: Any, inputs: Arrays, dims: Dims,
                dtypes: Mapping[str, DType]) -> PreparedBaseline:
        import torch  # optional dependency: only a timed torch baseline imports it

        tensors = {}
        for name, value in inputs.items():
            dt = getattr(torch, _TORCH_DTYPES.get(dtypes.get(name, DType.F32), "float32"))
            tensors[name] = torch.from_numpy(np.ascontiguousarray(value)).to(
                device="cuda", dtype=dt)
        torch.cuda.synchronize()
        return _TorchPrepared(device, stream, self._fn, tensors)


def _gemm(t: dict[str, Any]) -> dict[str, Any]:
    import torch  # optional dependency: only a timed torch baseline imports it

    return {"C": torch.matmul(t["A"], t["B"].T)}


def _kmeans(t: dict[str, Any]) -> dict[str, Any]:
    """Distances from one batched GEMM with f32 output where torch offers it (bf16 products
    rounded to bf16 would move near-ties), then argmin over the centroids."""
    import torch  # optional dependency: only a timed torch baseline imports it

    x, c = t["X"], t["C"]
    try:
        dots = torch.bmm(x, c.transpose(1, 2), out_dtype=torch.float32)
    except (TypeError, RuntimeError):
        dots = torch.bmm(x, c.transpose(1, 2))
    dist = t["Cn"][:, None, :] - 2.0 * dots
    return {"out": dist.argmin(-1).to(torch.int32)}


TORCH_BASELINES: dict[str, tuple[str, Any]] = {
    "gemm_bf16": ("torch.matmul(A, B.T) in bf16 (cuBLAS)", _gemm),
    "gemm_f16_sm80": ("torch.matmul(A, B.T) in f16 (cuBLAS)", _gemm),
    "kmeans_assign": ("torch: (Cn - 2 * bmm(X, C^T)).argmin(-1), bf16 in, f32 distances",
                      _kmeans),
}


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def baseline_for(task: Task, device: Device) -> Baseline | None:
    """The timed baseline for `task` on `device`, or None (report the description only)."""
    if device.fake or not torch_available():
        return None
    found = TORCH_BASELINES.get(task.name)
    if found is None:
        return None
    return TorchBaseline(*found)
