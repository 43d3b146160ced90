"""What the protocol launches: a candidate kernel, whatever actually runs it.

`Launchable` is the one method the verification protocol calls.  `CudaKernel` calls the
lowered C launcher `cake_launch_<kernel>` through ctypes with device pointers, the scalars,
the dims and a raw stream; the fake kernels in `fake.py` implement the same method over
numpy memory.
"""

from __future__ import annotations

import ctypes
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cake_core.ir.types import DType
from cake_core.run.device import Device, LaunchError
from cake_core.run.tensors import RunSetupError, TensorSpec, specs_from_meta
from cake_core.sim.dtypes import encode


class Launchable(ABC):
    """A kernel the protocol can launch on a device."""

    label: str = "kernel"
    specs: list[TensorSpec]
    dim_limits: dict[str, dict[str, Any]]
    """Per dim: {"multiple_of": int, "max": int | None} from the kernel's declarations."""

    @abstractmethod
    def launch(self, device: Device, buffers: Mapping[str, Any], dims: Mapping[str, int],
               scalars: Mapping[str, Any], stream: Any) -> None:
        """Enqueue one launch on `stream`; raise LaunchError when it cannot be launched."""

    def check_dims(self, dims: Mapping[str, int]) -> None:
        """RunSetupError when the shape breaks a dim's declared constraint."""
        for name, lim in self.dim_limits.items():
            if name not in dims:
                raise RunSetupError(f"the shape gives no value for dim {name}")
            v = int(dims[name])
            mult = int(lim.get("multiple_of") or 1)
            if v < 0:
                raise RunSetupError(f"{name}={v} is negative")
            if v % mult:
                raise RunSetupError(f"{name}={v} is not a multiple of {mult}, as the kernel "
                                    f"declares")
            hi = lim.get("max")
            if hi is not None and v > int(hi):
                raise RunSetupError(f"{name}={v} exceeds the kernel's declared max {hi}")


_SCALAR_CTYPES: dict[str, Any] = {
    "f32": ctypes.c_float, "i32": ctypes.c_int32, "u32": ctypes.c_uint32,
    "i8": ctypes.c_int8, "bool": ctypes.c_uint8,
    # 16-bit float scalars travel as their bits (a 2-byte struct goes in an integer register)
    "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
}


#: What the launcher returns, without launching, for dims that break the size contract.
CUDA_ERROR_INVALID_VALUE = 1


class CudaKernel(Launchable):
    """A lowered kernel in a shared library built by `build.build_library`."""

    def __init__(self, library: str | Path, meta: Mapping[str, Any]) -> None:
        self.meta = dict(meta)
        self.label = str(meta["kernel"])
        self.specs = specs_from_meta(meta)
        self.dim_limits = {k: dict(v) for k, v in (meta.get("dims") or {}).items()}
        self._lib = ctypes.CDLL(str(library))
        self._fn = getattr(self._lib, str(meta["launcher"]))
        self._params = [p for p in meta["params"] if p["kind"] != "tensor_map"]
        argtypes: list[Any] = []
        for p in self._params:
            if p["kind"] == "tensor":
                argtypes.append(ctypes.c_void_p)
            elif p["kind"] == "dim":
                argtypes.append(ctypes.c_int)
            else:
                ct = _SCALAR_CTYPES.get(p["dtype"])
                if ct is None:
                    raise RunSetupError(f"scalar parameter {p['name']} of dtype {p['dtype']} "
                                        "cannot be passed from Python")
                argtypes.append(ct)
        argtypes.append(ctypes.c_void_p)  # the stream
        self._fn.argtypes = argtypes
        self._fn.restype = ctypes.c_int
        self._dim_names = [str(p["name"]) for p in self._params if p["kind"] == "dim"]
        contract = meta.get("contract_check")
        self._contract = getattr(self._lib, str(contract), None) if contract else None
        if self._contract is not None:
            self._contract.argtypes = [ctypes.c_int] * len(self._dim_names)
            self._contract.restype = ctypes.c_char_p
        self._errstr = getattr(self._lib, "cake_runtime_error_string", None)
        if self._errstr is not None:
            self._errstr.argtypes = [ctypes.c_int]
            self._errstr.restype = ctypes.c_char_p
        setup = getattr(self._lib, "cake_runtime_setup", None)
        if setup is not None:
            setup.restype = ctypes.c_int
            self._setup = setup
        else:
            self._setup = None

    def prepare(self) -> None:
        """Turn off the persisting-L2 carve-out so no launch can keep data resident in L2
        across the flush (the runtime shim appended by build.py does it)."""
        if self._setup is not None:
            rc = self._setup()
            if rc != 0:
                raise LaunchError(f"device setup failed: {self.error_string(rc)}")

    def error_string(self, code: int) -> str:
        if self._errstr is None:
            return f"cudaError_t {code}"
        raw = self._errstr(code)
        return f"{raw.decode(errors='replace') if raw else 'unknown error'} ({code})"

    def launch(self, device: Device, buffers: Mapping[str, Any], dims: Mapping[str, int],
               scalars: Mapping[str, Any], stream: Any) -> None:
        args: list[Any] = []
        for p in self._params:
            name = p["name"]
            if p["kind"] == "tensor":
                args.append(ctypes.c_void_p(device.pointer(buffers[name])))
            elif p["kind"] == "dim":
                args.append(int(dims[name]))
            else:
                args.append(_scalar_arg(scalars[name], p["dtype"]))
        args.append(ctypes.c_void_p(device.stream_handle(stream)))
        rc = self._fn(*args)
        if rc != 0:
            msg = f"{self.meta['launcher']} returned {self.error_string(rc)}"
            broken = self.contract_error(dims) if rc == CUDA_ERROR_INVALID_VALUE else None
            if broken is not None:
                shape = ", ".join(f"{n}={int(dims[n])}" for n in self._dim_names)
                msg += f": {broken} ({shape}); nothing was launched"
            raise LaunchError(msg)

    def contract_error(self, dims: Mapping[str, int]) -> str | None:
        """The size-contract rule the dims break, as the library's own check words it (the
        launcher refuses such dims with cudaErrorInvalidValue); None when they keep it or
        the library has no check."""
        if self._contract is None:
            return None
        raw = self._contract(*(int(dims[n]) for n in self._dim_names))
        return raw.decode(errors="replace") if raw else None


def _scalar_arg(value: Any, dtype: str) -> Any:
    if dtype in ("f16", "bf16"):
        return int(np.asarray(encode(np.float32(value), DType(dtype))).view(np.uint16))
    if dtype == "f32":
        return float(value)
    return int(value)
