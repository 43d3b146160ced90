"""A device made of numpy memory and a virtual clock, and kernels that misbehave on purpose.

`FakeDevice` implements `Device` exactly enough for the verification protocol: buffers
are byte arrays, a fill writes bytes, events read a clock that only launches advance, so
timings are deterministic.  Its kernels are numpy functions (`FakeKernel`) or the CPU
simulator running a real .cake kernel (`SimulatorKernel`).

`BEHAVIOURS` names the ways a kernel can cheat or fail that the protocol must catch
(writing nothing, mutating an input, being right only on early calls, hanging, faulting,
looking impossibly fast).  They are selected by name, never imported by name, so a
subprocess worker can be told to run one through a JSON spec.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cake_core.ir.types import DType
from cake_core.run.baselines import Baseline, PreparedBaseline
from cake_core.run.device import Device, DeviceFault, LaunchError
from cake_core.run.kernels import Launchable
from cake_core.run.tensors import TensorSpec, from_storage, specs_from_kernel, to_storage
from cake_core.sim.engine import simulate
from cake_core.tasks import Arrays, Dims, Task


@dataclass
class FakeBuffer:
    data: np.ndarray
    address: int


@dataclass
class FakeEvent:
    t: float | None = None


@dataclass
class FakeStream:
    handle: int


class FakeDevice(Device):
    """numpy memory; a virtual clock in milliseconds that launches and fills advance."""

    backend = "fake"
    fake = True

    def __init__(self, *, name: str = "fake GPU", compute_capability: tuple[int, int] = (9, 0),
                 l2_bytes: int = 1 << 20, fill_ms_per_mb: float = 0.001) -> None:
        self.name = name
        self.compute_capability = compute_capability
        self.l2_bytes = l2_bytes
        self.clock_ms = 0.0
        self.fill_ms_per_mb = fill_ms_per_mb
        self.log: list[tuple[str, str]] = []
        """(what, detail) in order: ("launch", label), ("baseline", ...), ("fill", bytes),
        ("read", bytes) for an L2 flush."""
        self.pending_fault: str | None = None
        self._next = 0x10000
        self.live = 0
        self.memory: dict[int, FakeBuffer] = {}
        """Every live buffer by address: a real kernel can address all of its context's
        memory, so the attacks the protocol must withstand (reading the baseline's output,
        writing the flush buffer) scan this."""

    def advance(self, ms: float) -> None:
        self.clock_ms += ms

    def alloc(self, nbytes: int) -> FakeBuffer:
        self._next += (max(1, nbytes) + 255) // 256 * 256
        self.live += 1
        buf = FakeBuffer(np.zeros(max(1, nbytes), dtype=np.uint8), self._next)
        self.memory[buf.address] = buf
        return buf

    def free(self, buf: FakeBuffer) -> None:
        self.live -= 1
        self.memory.pop(buf.address, None)

    def upload(self, buf: FakeBuffer, data: np.ndarray) -> None:
        flat = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buf.data[: flat.size] = flat

    def download(self, buf: FakeBuffer, nbytes: int) -> np.ndarray:
        self._raise_pending()
        return buf.data[:nbytes].copy()

    def fill(self, buf: FakeBuffer, byte: int, nbytes: int, stream: Any,
             offset: int = 0) -> None:
        buf.data[offset:offset + nbytes] = byte
        self.advance(self.fill_ms_per_mb * nbytes / 1e6)
        self.log.append(("fill", str(nbytes)))

    def read_through(self, buf: FakeBuffer, nbytes: int, stream: Any) -> None:
        self.advance(self.fill_ms_per_mb * nbytes / 1e6)
        self.log.append(("read", str(nbytes)))

    def copy(self, dst: FakeBuffer, src: FakeBuffer, nbytes: int, stream: Any) -> None:
        dst.data[:nbytes] = src.data[:nbytes]
        self.log.append(("copy", str(nbytes)))

    def new_stream(self) -> FakeStream:
        return FakeStream(0x5000 + len(self.log))

    def stream_handle(self, stream: Any) -> int:
        return int(stream.handle)

    def pointer(self, buf: FakeBuffer) -> int:
        return buf.address

    def new_event(self) -> FakeEvent:
        return FakeEvent()

    def record(self, event: FakeEvent, stream: Any) -> None:
        event.t = self.clock_ms

    def elapsed_ms(self, start: FakeEvent, end: FakeEvent) -> float:
        assert start.t is not None and end.t is not None, "event never recorded"
        return end.t - start.t

    def synchronize(self) -> None:
        self._raise_pending()

    def _raise_pending(self) -> None:
        if self.pending_fault is not None:
            raise DeviceFault(self.pending_fault)


@dataclass
class FakeLaunch:
    """What a fake kernel body sees: decoded tensors by kernel name, and where to write."""

    dims: dict[str, int]
    call: int
    """0 for the first launch of this kernel, then 1, 2, ..."""
    device: FakeDevice
    buffers: Mapping[str, FakeBuffer]
    specs: Mapping[str, TensorSpec]
    scalars: Mapping[str, Any] = field(default_factory=dict)

    def read(self, name: str) -> np.ndarray:
        spec = self.specs[name]
        shape = spec.dims_shape(self.dims)
        raw = self.buffers[name].data[: spec.nbytes(self.dims)]
        return from_storage(raw, spec.dtype, shape)

    def write(self, name: str, values: np.ndarray) -> None:
        spec = self.specs[name]
        data = to_storage(np.broadcast_to(values, spec.dims_shape(self.dims)), spec.dtype)
        flat = data.view(np.uint8).reshape(-1)
        self.buffers[name].data[: flat.size] = flat

    def fault(self, message: str = "an illegal memory access was encountered") -> None:
        """Fail as an asynchronous CUDA error does: at the next synchronize."""
        self.device.pending_fault = message


Body = Callable[[FakeLaunch], None]


class FakeKernel(Launchable):
    """A numpy function standing in for a kernel; `cost_ms` is what the clock advances by
    (a number, or a function of the call index for jittery timings)."""

    def __init__(self, specs: list[TensorSpec], body: Body, *, label: str = "fake",
                 cost_ms: float | Callable[[int], float] = 1.0,
                 dim_limits: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.specs = specs
        self.label = label
        self.body = body
        self.cost_ms = cost_ms
        self.dim_limits = {k: dict(v) for k, v in (dim_limits or {}).items()}
        self.calls = 0

    def launch(self, device: Device, buffers: Mapping[str, Any], dims: Mapping[str, int],
               scalars: Mapping[str, Any], stream: Any) -> None:
        if not isinstance(device, FakeDevice):
            raise LaunchError("a fake kernel runs only on FakeDevice")
        ctx = FakeLaunch(dict(dims), self.calls, device, buffers,
                         {s.name: s for s in self.specs}, scalars)
        self.calls += 1
        device.log.append(("launch", self.label))
        self.body(ctx)
        cost = self.cost_ms(ctx.call) if callable(self.cost_ms) else self.cost_ms
        device.advance(cost)


def _reference_outputs(task: Task, rename: Mapping[str, str], ctx: FakeLaunch) -> Arrays:
    """The task's reference computed from the kernel's current inputs, by kernel name."""
    back = {rename.get(n, n): n for n in [*task.outputs]}
    inputs = {}
    for spec in ctx.specs.values():
        task_name = next((t for t, k in rename.items() if k == spec.name), spec.name)
        if task_name not in task.outputs:
            inputs[task_name] = ctx.read(spec.name)
    want = task.reference(inputs, ctx.dims)
    return {k: want[t] for k, t in back.items()}


def behaviour(name: str, task: Task, rename: Mapping[str, str], **params: Any) -> Body:
    """The body of a named fake behaviour (see BEHAVIOURS)."""
    if name not in BEHAVIOURS:
        raise ValueError(f"unknown fake behaviour {name!r} (known: {', '.join(BEHAVIOURS)})")
    outputs = {rename.get(n, n) for n in task.outputs}

    def correct(ctx: FakeLaunch) -> None:
        for k, v in _reference_outputs(task, rename, ctx).items():
            ctx.write(k, v)

    def writes_nothing(ctx: FakeLaunch) -> None:
        return None

    def partial(ctx: FakeLaunch) -> None:
        for k, v in _reference_outputs(task, rename, ctx).items():
            cur = ctx.read(k)
            cur[:-1] = v[:-1]  # the last row (a ragged edge tile) is never written
            ctx.write(k, cur)

    def wrong(ctx: FakeLaunch) -> None:
        for k, v in _reference_outputs(task, rename, ctx).items():
            if np.issubdtype(np.asarray(v).dtype, np.integer):
                ctx.write(k, np.zeros_like(v) + (np.asarray(v) == 0))
            else:
                ctx.write(k, np.asarray(v) + 1.0)

    def mutates_input(ctx: FakeLaunch) -> None:
        correct(ctx)
        first_input = next(n for n in ctx.specs if n not in outputs)
        ctx.write(first_input, np.zeros_like(ctx.read(first_input)))

    def caches(ctx: FakeLaunch) -> None:
        if ctx.call == 0:
            correct(ctx)

    limit = int(params.get("calls", 4))

    def correct_first_calls(ctx: FakeLaunch) -> None:
        if ctx.call < limit:
            correct(ctx)

    def hang(ctx: FakeLaunch) -> None:
        time.sleep(float(params.get("seconds", 3600.0)))

    def fault(ctx: FakeLaunch) -> None:
        ctx.fault()

    def launch_error(ctx: FakeLaunch) -> None:
        raise LaunchError("cake_launch_fake returned invalid argument (1)")

    def abort(ctx: FakeLaunch) -> None:
        os.abort()

    bodies: dict[str, Body] = {
        "correct": correct, "too_fast": correct, "writes_nothing": writes_nothing,
        "partial": partial, "wrong": wrong, "mutates_input": mutates_input, "caches": caches,
        "correct_first_calls": correct_first_calls, "hang": hang, "fault": fault,
        "launch_error": launch_error, "abort": abort,
    }
    return bodies[name]


#: Named fake behaviours: what each does (the protocol's tests use every one).
BEHAVIOURS: dict[str, str] = {
    "correct": "computes the task's reference",
    "too_fast": "correct, with an impossibly short time",
    "writes_nothing": "leaves every output untouched",
    "partial": "writes all but the last row of each output (a missing edge tile)",
    "wrong": "writes values off by one",
    "mutates_input": "correct outputs, then zeroes its first input",
    "caches": "correct on its first call only",
    "correct_first_calls": "correct for the first `calls` calls (default 4), then writes nothing",
    "hang": "never returns",
    "fault": "faults asynchronously (an illegal address at the next synchronize)",
    "launch_error": "the launcher refuses to launch",
    "abort": "kills its process (a crash inside the driver)",
}


def fake_kernel(task: Task, specs: list[TensorSpec], name: str, *,
                rename: Mapping[str, str] | None = None, cost_ms: float | None = None,
                **params: Any) -> FakeKernel:
    """A FakeKernel with the named behaviour over the kernel interface `specs`."""
    rename = dict(rename or {})
    default = 1e-7 if name == "too_fast" else 1.0
    return FakeKernel(specs, behaviour(name, task, rename, **params), label=f"fake:{name}",
                      cost_ms=default if cost_ms is None else cost_ms)


class SimulatorKernel(Launchable):
    """The CPU simulator as the kernel: a real .cake kernel's semantics on the fake device."""

    def __init__(self, sim_kernel: Any, *, cost_ms: float = 1.0) -> None:
        self.sk = sim_kernel
        self.label = f"sim:{sim_kernel.name}"
        self.specs = specs_from_kernel(sim_kernel.kernel)
        self.dim_limits = {}
        self.cost_ms = cost_ms

    def launch(self, device: Device, buffers: Mapping[str, Any], dims: Mapping[str, int],
               scalars: Mapping[str, Any], stream: Any) -> None:
        if not isinstance(device, FakeDevice):
            raise LaunchError("the simulator kernel runs only on FakeDevice")
        device.log.append(("launch", self.label))
        ctx = FakeLaunch(dict(dims), 0, device, buffers, {s.name: s for s in self.specs})
        inputs: dict[str, Any] = {s.name: ctx.read(s.name) for s in self.specs}
        inputs.update(scalars)
        res = simulate(self.sk, dims, inputs)
        for s in self.specs:
            out = res.outputs.get(s.name)
            if out is not None:
                ctx.write(s.name, out)
        device.advance(self.cost_ms)


class _FakePrepared(PreparedBaseline):
    """The reference's outputs live in fake device memory, as a library call's do, so a
    kernel that goes looking for them can find them."""

    def __init__(self, device: FakeDevice, task: Task, inputs: Arrays, dims: Dims,
                 cost_ms: float, dtypes: Mapping[str, DType]) -> None:
        self._device, self._task, self._inputs, self._dims = device, task, inputs, dims
        self._cost = cost_ms
        self._dtypes = dict(dtypes)
        self._out: dict[str, tuple[FakeBuffer, DType, tuple[int, ...]]] = {}

    def launch(self) -> None:
        self._device.log.append(("baseline", self._task.name))
        for name, value in self._task.reference(self._inputs, self._dims).items():
            dtype = self._dtypes.get(name, DType.F32)
            storage = to_storage(np.asarray(value), dtype)
            if name not in self._out:
                self._out[name] = (self._device.alloc(storage.nbytes), dtype,
                                   tuple(np.shape(value)))
            self._device.upload(self._out[name][0], storage)
        self._device.advance(self._cost)

    def outputs(self) -> Arrays:
        return {k: from_storage(buf.data[: int(np.prod(shape)) * dt.bytes], dt, shape)
                for k, (buf, dt, shape) in self._out.items()}

    def scrub(self) -> None:
        for buf, _, _ in self._out.values():
            self._device.fill(buf, 0xFF, buf.data.size, None)

    def release(self) -> None:
        for buf, _, _ in self._out.values():
            self._device.free(buf)
        self._out = {}


class FakeBaseline(Baseline):
    """The task's numpy reference as the 'library call', with a fixed virtual cost."""

    def __init__(self, task: Task, cost_ms: float = 1.0) -> None:
        self.task = task
        self.cost_ms = cost_ms
        self.description = f"fake baseline ({task.baseline})"

    def prepare(self, device: Device, stream: Any, inputs: Arrays, dims: Dims,
                dtypes: Mapping[str, DType]) -> PreparedBaseline:
        assert isinstance(device, FakeDevice)
        return _FakePrepared(device, self.task, {k: v.copy() for k, v in inputs.items()},
                             dims, self.cost_ms, dtypes)
