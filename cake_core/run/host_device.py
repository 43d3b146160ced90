"""Host memory as a device: what an emulated kernel reads and writes.

Under CPU emulation (docs/emulation.md) the lowered launcher runs in this process and
dereferences the pointers it is given, so buffers must be real memory: numpy arrays whose
addresses `pointer` returns, aligned to 256 bytes as `cudaMalloc`'s are (TMA and vector
loads assume that alignment, and the emulator checks it).  Launches are synchronous, so
streams are the null stream, a fill happens at once and `synchronize` has nothing to wait
for.  Events read a virtual clock that nothing advances: timing an emulated kernel means
nothing, and the runner never does (a run on this device is correctness only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cake_core.run.device import Device

#: cudaMalloc's alignment, which the generated code (TMA, vector accesses) relies on.
ALIGNMENT = 256


@dataclass
class HostBuffer:
    data: np.ndarray
    """`nbytes` bytes at `address` (a view into `_raw`)."""
    address: int
    nbytes: int
    _raw: np.ndarray
    """The allocation the view lives in; kept so the memory outlives every use of it."""


@dataclass
class HostEvent:
    t: float | None = None


class HostDevice(Device):
    """numpy memory at real, 256-byte-aligned addresses; a clock that stands still."""

    backend = "emulate"

    def __init__(self, *, name: str = "the CPU (emulated)",
                 compute_capability: tuple[int, int] = (0, 0)) -> None:
        self.name = name
        self.compute_capability = compute_capability
        self.l2_bytes = 0
        self.clock_ms = 0.0
        self.live = 0

    def alloc(self, nbytes: int) -> HostBuffer:
        n = max(1, int(nbytes))
        raw = np.zeros(n + ALIGNMENT, dtype=np.uint8)
        skip = -raw.ctypes.data % ALIGNMENT
        view = raw[skip: skip + n]
        self.live += 1
        return HostBuffer(view, int(view.ctypes.data), int(nbytes), raw)

    def free(self, buf: HostBuffer) -> None:
        self.live -= 1

    def nbytes(self, buf: HostBuffer) -> int:
        """The size asked for: what a launch may touch, for the emulator's bounds checks."""
        return buf.nbytes

    def upload(self, buf: HostBuffer, data: np.ndarray) -> None:
        flat = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buf.data[: flat.size] = flat

    def download(self, buf: HostBuffer, nbytes: int) -> np.ndarray:
        return buf.data[:nbytes].copy()

    def fill(self, buf: HostBuffer, byte: int, nbytes: int, stream: Any,
             offset: int = 0) -> None:
        buf.data[offset:offset + nbytes] = byte

    def read_through(self, buf: HostBuffer, nbytes: int, stream: Any) -> None:
        """Nothing to evict: host memory has no device L2 (`l2_bytes` is 0)."""

    def new_stream(self) -> None:
        return None

    def stream_handle(self, stream: Any) -> int:
        return 0

    def pointer(self, buf: HostBuffer) -> int:
        return buf.address

    def new_event(self) -> HostEvent:
        return HostEvent()

    def record(self, event: HostEvent, stream: Any) -> None:
        event.t = self.clock_ms

    def elapsed_ms(self, start: HostEvent, end: HostEvent) -> float:
        if start.t is None or end.t is None:
            raise ValueError("event never recorded")
        return end.t - start.t

    def synchronize(self) -> None:
        """Nothing to wait for: an emulated launch has finished when the launcher returns."""


__all__ = ["ALIGNMENT", "HostBuffer", "HostDevice", "HostEvent"]
