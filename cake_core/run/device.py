"""The few device operations the runner needs, behind one small interface.

The verification protocol (`protocol.py`) is written against `Device` only: memory,
copies, a byte fill, a read of a whole buffer (the L2 flush), streams, events and a
device-wide synchronize.  Three backends
implement it: `PycudaDevice` (the `gpu` extra), `TorchDevice` (when torch is installed but
pycuda is not, as on images that ship torch), and `FakeDevice` (numpy memory and a virtual
clock), which lets every rule of the protocol be tested on a machine without a GPU.

`probe_gpu` answers "is there a CUDA device, and which?" through the driver library with
ctypes, without creating a context or importing a backend, so `cake bench` can refuse
early with a clear message and the parent process never holds GPU state that a timed-out
candidate could corrupt.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

BACKENDS = ("pycuda", "torch")


class DeviceError(Exception):
    """The backend could not do what was asked (no device, no backend installed)."""


class DeviceFault(Exception):
    """The GPU reported an error after a launch (an illegal address, a misaligned access):
    the context is unusable afterwards, so the worker reports it and exits."""


class LaunchError(Exception):
    """The launcher refused to launch (bad configuration, a tensor map it cannot encode)."""


class Device(ABC):
    """One GPU (or a stand-in): buffers are opaque handles the backend understands."""

    backend: str = "?"
    name: str = "?"
    compute_capability: tuple[int, int] = (0, 0)
    l2_bytes: int = 0
    fake: bool = False
    """True for FakeDevice: timings are a virtual clock, not measurements."""

    @abstractmethod
    def alloc(self, nbytes: int) -> Any: ...

    @abstractmethod
    def free(self, buf: Any) -> None: ...

    @abstractmethod
    def upload(self, buf: Any, data: np.ndarray) -> None:
        """Copy a contiguous host array's bytes into `buf` (synchronous)."""

    @abstractmethod
    def download(self, buf: Any, nbytes: int) -> np.ndarray:
        """The first `nbytes` of `buf` as a uint8 host array (synchronous)."""

    @abstractmethod
    def fill(self, buf: Any, byte: int, nbytes: int, stream: Any, offset: int = 0) -> None:
        """Set `nbytes` bytes of `buf`, from byte `offset`, to `byte`, ordered on `stream`."""

    @abstractmethod
    def read_through(self, buf: Any, nbytes: int, stream: Any) -> None:
        """Read the first `nbytes` of `buf` on the device, ordered on `stream`, writing
        nothing but a few bytes of the backend's own.

        This is the L2 flush before a timed call.  Reading a buffer of at least twice the
        L2 evicts what the previous call left there and leaves only clean lines behind; a
        fill (a memset) would evict as well but leave the L2 full of dirty lines, whose
        write-back to HBM then happens inside the next timed kernel and is billed to it."""

    def copy(self, dst: Any, src: Any, nbytes: int, stream: Any) -> None:
        """Copy the first `nbytes` of `src` into `dst`, ordered on `stream`.

        The default goes through the host; GPU backends copy on the device, so restaging
        a candidate's inputs before every timed call stays cheap."""
        self.synchronize()
        self.upload(dst, self.download(src, nbytes))

    @abstractmethod
    def new_stream(self) -> Any: ...

    @abstractmethod
    def stream_handle(self, stream: Any) -> int:
        """The raw CUstream / cudaStream_t value, for the C launcher."""

    @abstractmethod
    def pointer(self, buf: Any) -> int:
        """The device address of `buf`, for the C launcher."""

    @abstractmethod
    def new_event(self) -> Any: ...

    @abstractmethod
    def record(self, event: Any, stream: Any) -> None: ...

    @abstractmethod
    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events (both must have completed)."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for all work on every stream of the device; raise DeviceFault on an error."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend holds (contexts, pools)."""


@dataclass(frozen=True)
class GpuProbe:
    """What the driver says about device 0, or why there is none."""

    present: bool
    reason: str = ""
    name: str = ""
    compute_capability: tuple[int, int] = (0, 0)
    l2_bytes: int = 0
    memory_bytes: int = 0

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


_CU_ATTR_L2 = 38
_CU_ATTR_CC_MAJOR = 75
_CU_ATTR_CC_MINOR = 76


def probe_gpu() -> GpuProbe:
    """Ask libcuda (cuInit, cuDeviceGet*) about device 0; never raises."""
    name = ctypes.util.find_library("cuda")
    candidates = [n for n in ("libcuda.so.1", name, "libcuda.so") if n]
    lib = None
    for cand in candidates:
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError:
            continue
    if lib is None:
        return GpuProbe(False, "the NVIDIA driver library (libcuda) is not installed")
    try:
        rc = lib.cuInit(0)
        if rc != 0:
            return GpuProbe(False, f"cuInit failed with CUresult {rc} (no usable GPU, or the "
                                   "driver is older than the toolkit)")
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
            return GpuProbe(False, "the driver sees no GPU")
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return GpuProbe(False, "cuDeviceGet(0) failed")
        buf = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(buf, 256, dev)

        def attr(code: int) -> int:
            v = ctypes.c_int(0)
            lib.cuDeviceGetAttribute(ctypes.byref(v), code, dev)
            return int(v.value)

        mem = ctypes.c_size_t(0)
        total = getattr(lib, "cuDeviceTotalMem_v2", None)
        if total is not None:
            total(ctypes.byref(mem), dev)
        return GpuProbe(True, "", buf.value.decode(errors="replace"),
                        (attr(_CU_ATTR_CC_MAJOR), attr(_CU_ATTR_CC_MINOR)), attr(_CU_ATTR_L2),
                        int(mem.value))
    except (AttributeError, OSError) as exc:
        return GpuProbe(False, f"the driver library is unusable: {exc}")


def available_backends() -> list[str]:
    """Installed GPU backends, preferred first (found without importing them)."""
    return [b for b in BACKENDS if importlib.util.find_spec(b) is not None]


def open_device(backend: str = "auto") -> Device:
    """A Device on GPU 0 through `backend` ("auto": pycuda, else torch)."""
    if backend == "auto":
        found = available_backends()
        if not found:
            raise DeviceError("neither pycuda (`pip install cake-kernels[gpu]`) nor torch is "
                              "installed")
        errors = []
        for name in found:  # an installed but unusable pycuda falls back to torch
            try:
                return open_device(name)
            except DeviceError as exc:
                errors.append(f"{name}: {exc}")
        raise DeviceError("; ".join(errors))
    if backend == "pycuda":
        # a cycle: run.pycuda_device and run.torch_device subclass Device from this module
        from cake_core.run.pycuda_device import PycudaDevice

        return PycudaDevice()
    if backend == "torch":
        from cake_core.run.torch_device import TorchDevice  # the same cycle

        return TorchDevice()
    raise DeviceError(f"unknown backend {backend!r} (known: auto, {', '.join(BACKENDS)})")
