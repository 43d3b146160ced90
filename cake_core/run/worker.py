"""The candidate's own process: `python -m cake_core.run.worker SPEC.json --events-fd N`.

The parent (`runner.py`) writes a JSON spec (task file, kernel to load, backend, shapes,
seeds, timing) and reads one JSON event per line from a pipe: `ready`, `progress` at
every phase, `shape` with each shape's result, `done` or `error`.  Progress events are the
heartbeat the parent's timeout watches: a kernel that hangs stops them, and the parent
kills this whole process group.  A GPU fault poisons the CUDA context, so after one this
process reports the shape and exits; the parent starts a fresh one for the shapes left.

The spec names what to load (a shared library and its lowering metadata, a .cake kernel
for the simulator, a named fake behaviour); it never carries code.  An emulated kernel
(backend `emulate`, kind `emulated`) is a library built for the CPU, run on host memory in
this process: a crash or a hang in it ends this process, never the parent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, TextIO

from cake_core.run.baselines import baseline_for
from cake_core.run.device import open_device
from cake_core.run.emulated import EmulatedKernel
from cake_core.run.fake import FakeBaseline, FakeDevice, SimulatorKernel, fake_kernel
from cake_core.run.host_device import HostDevice
from cake_core.run.kernels import CudaKernel
from cake_core.run.protocol import TimingConfig, run_shape
from cake_core.run.results import FLAG_EMULATED, Workload
from cake_core.run.tensors import specs_from_kernel
from cake_core.sim.program import SimKernel
from cake_core.tasks import load_task

EXIT_OK, EXIT_SETUP, EXIT_DEVICE_LOST = 0, 2, 3


class _Events:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, event: str, **data: Any) -> None:
        self.stream.write(json.dumps({"event": event, **data}) + "\n")
        self.stream.flush()


def _kernel_ir(source: str, name: str) -> Any:
    # start-up: a CUDA candidate's worker checks no source, so skips the compiler (~75 ms)
    from cake_core.check import check_text

    text = Path(source).read_text(encoding="utf-8")
    res = check_text(text, source, passes=[])
    if res.program is None:
        raise RuntimeError(f"{source} does not check")
    for k in res.program.kernels:
        if k.name == name:
            return k
    raise RuntimeError(f"{source} has no kernel {name}")


def make_device(spec: dict[str, Any]) -> Any:
    backend = spec.get("backend", "auto")
    if backend in ("fake", "fake-sim"):
        fake = spec.get("fake") or {}
        return FakeDevice(name=str(fake.get("device", "fake GPU")),
                          l2_bytes=int(fake.get("l2_bytes", 1 << 20)))
    if backend == "emulate":
        return HostDevice(name=str(spec["kernel"].get("device") or "the CPU (emulated)"))
    return open_device(backend)


def make_kernel(spec: dict[str, Any], task: Any, device: Any) -> Any:
    k = spec["kernel"]
    kind = k["kind"]
    if kind == "cuda":
        kernel = CudaKernel(k["library"], k["meta"])
        kernel.prepare()
        return kernel
    if kind == "emulated":
        emulated = EmulatedKernel(k["library"], k["meta"], seed=int(k.get("seed", 0)),
                                  flags=int(k.get("flags", 0)),
                                  order=str(k.get("order", "both")))
        emulated.prepare()
        return emulated
    if kind == "sim":
        text = Path(k["source"]).read_text(encoding="utf-8")
        return SimulatorKernel(SimKernel.from_text(text, k["source"], k["name"]),
                               cost_ms=float(k.get("cost_ms", 1.0)))
    if kind == "fake":
        specs = specs_from_kernel(_kernel_ir(k["source"], k["name"]))
        return fake_kernel(task, specs, k["behaviour"], rename=spec.get("rename") or {},
                           cost_ms=k.get("cost_ms"), **(k.get("params") or {}))
    raise ValueError(f"unknown kernel kind {kind!r}")


def make_baseline(spec: dict[str, Any], task: Any, device: Any) -> Any:
    b = spec.get("baseline") or {"kind": "auto"}
    if b["kind"] == "none":
        return None
    if b["kind"] == "fake":
        return FakeBaseline(task, float(b.get("cost_ms", 1.0)))
    return baseline_for(task, device)


def run(spec: dict[str, Any], emit: _Events) -> int:
    task = load_task(spec["task"])
    device = make_device(spec)
    kernel = make_kernel(spec, task, device)
    baseline = make_baseline(spec, task, device)
    emit("ready", backend=device.backend, device=device.name,
         compute_capability=list(device.compute_capability), l2_bytes=device.l2_bytes,
         baseline=baseline.description if baseline is not None else None)
    t = spec.get("timing") or {}
    timing = TimingConfig(int(t.get("warmup", 3)), int(t.get("rounds", 5)),
                          int(t.get("calls", 10)), bool(t.get("enabled", True)))
    for item in spec["shapes"]:
        index = int(item["index"])
        emit("start", index=index)

        def progress(phase: str, host: bool, index: int = index) -> None:
            emit("progress", index=index, phase=phase, host=host)

        wl = item.get("workload")
        seeds = item.get("seeds") or spec.get("seeds") or [0, 1]
        if isinstance(kernel, EmulatedKernel):
            kernel.start_shape()
        res = run_shape(device, kernel, task, {k: int(v) for k, v in item["dims"].items()},
                        label=str(item.get("label", "")), rename=spec.get("rename") or {},
                        seeds=[int(s) for s in seeds], baseline=baseline,
                        timing=timing, workload=Workload.from_json(wl) if wl else None,
                        flush_bytes=int(spec.get("flush_bytes") or 0), progress=progress,
                        reference_cache=Path(spec["reference_cache"])
                        if spec.get("reference_cache") else None)
        if isinstance(kernel, EmulatedKernel):
            kernel.locate(res)
            res.flags = sorted({*res.flags, FLAG_EMULATED})
        emit("shape", index=index, result=res.to_json())
        if res.device_lost:
            return EXIT_DEVICE_LOST
    device.close()
    emit("done")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cake_core.run.worker")
    ap.add_argument("spec")
    ap.add_argument("--events-fd", type=int, required=True)
    args = ap.parse_args(argv)
    events = os.fdopen(args.events_fd, "w", buffering=1, encoding="utf-8")
    emit = _Events(events)
    try:
        spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
        return run(spec, emit)
    except Exception as exc:
        emit("error", message=f"{type(exc).__name__}: {exc}",
             traceback=traceback.format_exc(limit=8))
        return EXIT_SETUP


if __name__ == "__main__":
    sys.exit(main())
