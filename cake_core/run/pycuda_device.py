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

#: The L2 flush: every thread XORs 8-byte words of the buffer, grid-stride, and stores
#: only when the XOR equals a key the compiler cannot know, so no load is optimized away
#: and the kernel writes nothing in practice (a hit writes 8 bytes of its own sink).
READ_KERNEL = r"""
extern "C" __global__ void cake_read_through(const unsigned long long* __restrict__ p,
                                             unsigned long long words,
                                             unsigned long long key,
                                             unsigned long long* sink) {
  unsigned long long acc = 0;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < words; i += stride) {
    acc ^= p[i];
  }
  if (acc == key) *sink = acc;
}
"""
READ_THREADS = 256
#: Key of READ_KERNEL: the XOR of a thread's words equals it by chance only.
READ_KEY = 0x9E3779B97F4A7C15


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
        self._sms = int(self._dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT))
        try:  # compiled with nvcc now, so a failure falls back to torch at open_device
            from pycuda.compiler import SourceModule  # the gpu extra

            module = SourceModule(READ_KERNEL, no_extern_c=True, options=["-O3"])
        except Exception as exc:  # pragma: no cover - depends on the machine
            raise DeviceError(f"pycuda cannot compile the L2 flush kernel: {exc}") from exc
        self._read = module.get_function("cake_read_through")
        self._sink = cuda.mem_alloc(8)

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

    def read_through(self, buf: Any, nbytes: int, stream: Any) -> None:
        """READ_KERNEL over the whole 8-byte words; a tail of fewer than 8 bytes is below
        one L2 line and left."""
        words = nbytes // 8
        if words == 0:
            return
        blocks = max(1, min(8 * self._sms, -(-words // READ_THREADS)))
        self._read(buf, np.uint64(words), np.uint64(READ_KEY), self._sink,
                   block=(READ_THREADS, 1, 1), grid=(blocks, 1), stream=stream)

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
