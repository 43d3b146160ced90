"""`Device` through torch.cuda: the fallback where torch is installed and pycuda is not.

Buffers are flat uint8 tensors; the launcher gets their `data_ptr()` and the raw handle of
a torch stream.  torch's caching allocator reuses freed memory, which is exactly how a
kernel that writes nothing can "return" a stale correct answer; the protocol defends
against it by poisoning every output before every checked launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cake_core.run.device import Device, DeviceError, DeviceFault


class TorchDevice(Device):
    backend = "torch"

    def __init__(self, ordinal: int = 0) -> None:
        try:
            import torch  # optional dependency
        except Exception as exc:  # pragma: no cover - depends on the machine
            raise DeviceError(f"torch cannot be imported: {exc}") from exc
        if not torch.cuda.is_available():  # pragma: no cover - depends on the machine
            raise DeviceError("torch sees no CUDA device (a CPU-only build, or no driver)")
        self._torch = torch
        self._device = torch.device("cuda", ordinal)
        try:
            torch.cuda.set_device(self._device)
            torch.cuda.init()
        except RuntimeError as exc:  # pragma: no cover - depends on the machine
            raise DeviceError(f"torch cannot open GPU {ordinal}: {exc}") from exc
        props = torch.cuda.get_device_properties(self._device)
        self.name = props.name
        self.compute_capability = (props.major, props.minor)
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0))

    def alloc(self, nbytes: int) -> Any:
        return self._torch.empty(max(1, nbytes), dtype=self._torch.uint8, device=self._device)

    def free(self, buf: Any) -> None:
        del buf  # the tensor's last reference goes with the caller's

    def upload(self, buf: Any, data: np.ndarray) -> None:
        flat = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buf[: flat.size].copy_(self._torch.from_numpy(flat))
        self.synchronize()

    def download(self, buf: Any, nbytes: int) -> np.ndarray:
        try:
            return buf[:nbytes].cpu().numpy()
        except RuntimeError as exc:
            raise DeviceFault(str(exc)) from exc

    def fill(self, buf: Any, byte: int, nbytes: int, stream: Any, offset: int = 0) -> None:
        with self._torch.cuda.stream(stream):
            buf[offset:offset + nbytes].fill_(byte)

    def read_through(self, buf: Any, nbytes: int, stream: Any) -> None:
        """A max-reduction over the bytes (as 32-bit words where they divide): one kernel
        that reads every byte and writes one scalar into a fresh block of the caching
        allocator, which is never memset."""
        words = buf[:nbytes - nbytes % 4].view(self._torch.int32) if nbytes >= 4 else None
        with self._torch.cuda.stream(stream):
            if words is not None:
                words.amax()
            if nbytes % 4:
                buf[nbytes - nbytes % 4:nbytes].amax()

    def copy(self, dst: Any, src: Any, nbytes: int, stream: Any) -> None:
        with self._torch.cuda.stream(stream):
            dst[:nbytes].copy_(src[:nbytes])

    def new_stream(self) -> Any:
        return self._torch.cuda.Stream(device=self._device)

    def stream_handle(self, stream: Any) -> int:
        return int(stream.cuda_stream)

    def pointer(self, buf: Any) -> int:
        return int(buf.data_ptr())

    def new_event(self) -> Any:
        return self._torch.cuda.Event(enable_timing=True)

    def record(self, event: Any, stream: Any) -> None:
        event.record(stream)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end))

    def synchronize(self) -> None:
        try:
            self._torch.cuda.synchronize(self._device)
        except RuntimeError as exc:
            raise DeviceFault(str(exc)) from exc
