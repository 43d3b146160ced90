"""`Device` through pycuda (the `gpu` extra).

The primary context is retained rather than a new one created: the C launcher's runtime,
and torch when a baseline uses it, work in the primary context, and streams and pointers
are only valid inside the context that made them.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from cake_core.run.device import Device, DeviceError, DeviceFault


class PycudaDevice(Device):
    backend = "pycuda"

    def __init__(self, ordinal: int = 0) -> None:
        try:
            import pycuda.driver as cuda  # optional dependency (the gpu extra)
        except Exception as exc:  # pragma: no cover - not installed, or built for other CUDA
            raise DeviceError(f"pycuda cannot be imported: {exc}") from exc
        self._cuda = cuda
        try:
            cuda.init()
            self._dev = cuda.Device(ordinal)
            self._ctx = self._dev.retain_primary_context()
            self._ctx.push()
        except Exception as exc:  # pragma: no cover - depends on the machine
            raise DeviceError(f"pycuda cannot open GPU {ordinal}: {exc}") from exc
        self.name = self._dev.name()
        self.compute_capability = tuple(self._dev.compute_capability())
        self.l2_bytes = int(self._dev.get_attribute(cuda.device_attribute.L2_CACHE_SIZE))

    def alloc(self, nbytes: int) -> Any:
        return self._cuda.mem_alloc(max(1, nbytes))

    def free(self, buf: Any) -> None:
        buf.free()

    def upload(self, buf: Any, data: np.ndarray) -> None:
        self._cuda.memcpy_htod(buf, np.ascontiguousarray(data).view(np.uint8).reshape(-1))

    def download(self, buf: Any, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        try:
            self._cuda.memcpy_dtoh(out, buf)
        except self._cuda.Error as exc:
            raise DeviceFault(str(exc)) from exc
        return out

    def fill(self, buf: Any, byte: int, nbytes: int, stream: Any, offset: int = 0) -> None:
        self._cuda.memset_d8_async(int(buf) + offset, byte, nbytes, stream)

    def copy(self, dst: Any, src: Any, nbytes: int, stream: Any) -> None:
        self._cuda.memcpy_dtod_async(dst, src, nbytes, stream)

    def new_stream(self) -> Any:
        return self._cuda.Stream()

    def stream_handle(self, stream: Any) -> int:
        return int(stream.handle)

    def pointer(self, buf: Any) -> int:
        return int(buf)

    def new_event(self) -> Any:
        return self._cuda.Event()

    def record(self, event: Any, stream: Any) -> None:
        event.record(stream)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(end.time_since(start))

    def synchronize(self) -> None:
        try:
            self._cuda.Context.synchronize()
        except self._cuda.Error as exc:
            raise DeviceFault(str(exc)) from exc

    def close(self) -> None:
        with contextlib.suppress(self._cuda.Error):  # best effort at exit
            self._ctx.pop()
