"""The parent side of a GPU run: prepare a candidate, run it in a subprocess, report.

`bench(...)` checks and lowers the .cake kernel, builds its shared library for the GPU the
driver reports, works out each shape's roofline floor, and then runs the protocol in a
worker process (`worker.py`) started in its own session.  The parent only reads the
worker's events: when none arrives for `timeout` seconds the whole process group is
killed, the shape is reported as a timeout (CK706), and a fresh worker takes the shapes
left, so one hang or one illegal address ends a candidate's shape, never the caller.

Findings come back as CK7xx diagnostics at the kernel's name (or at the .cake line a
finding names), in the same stream as every other finding of the compiler.

Backend `emulate` runs the same lowered CUDA on the CPU instead (docs/emulation.md): the
library is built with the host C++ compiler (`cake_core.emulate`), the worker runs it on
host memory, on the task's simulator shapes by default, without timing or a baseline.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, sort_diagnostics
from cake_core.hardware import get_arch, get_gpu
from cake_core.run.device import available_backends, probe_gpu
from cake_core.run.protocol import TimingConfig
from cake_core.run.results import (
    FLAG_BELOW_FLOOR,
    FLAG_TOO_FAST,
    MAX_SPEEDUP,
    BenchReport,
    Finding,
    ShapeResult,
    Workload,
)
from cake_core.run.roofline import device_gpu, gpu_for_device, workload
from cake_core.run.tensors import RunSetupError, specs_from_kernel, specs_from_meta
from cake_core.source import SourceFile, display_path
from cake_core.tasks import KernelEntry, Shape, Task

ROOT = Path(__file__).resolve().parent.parent.parent

#: Seconds a fresh worker may take to import its backend and open the GPU.
STARTUP_SECONDS = 180.0
#: After this many timeouts the shapes left are skipped: a kernel that hangs twice will
#: most likely hang again, and each hang costs a whole timeout.
MAX_TIMEOUTS = 2
#: Seconds an emulated launch may run without progress.  Emulation is orders of magnitude
#: slower than a GPU (the 128x256x64-tile GEMM at 256x256x512 takes up to a minute), and the
#: runtime reports a deadlock itself; only a kernel spinning forever reaches this.
EMULATE_TIMEOUT = 300.0
EMULATE = "emulate"


class BenchSetupError(Exception):
    """Nothing could be run: no GPU, no backend, a kernel that does not check.  `exit`
    is the status the CLI should use (2: usage or environment)."""

    def __init__(self, message: str, diagnostics: Sequence[Diagnostic] = (), exit: int = 2
                 ) -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics)
        self.exit = exit


class NoGpuError(BenchSetupError):
    pass


@dataclass
class BenchOptions:
    shapes: list[Shape] | None = None
    """None: the task's GPU shapes for this kernel (its simulator shapes under emulation)."""
    seeds: tuple[int, ...] = (0, 1)
    timing: TimingConfig = field(default_factory=TimingConfig)
    timeout: float = 120.0
    """Seconds the candidate may run on the GPU without progress before it is killed."""
    host_timeout: float = 900.0
    """Seconds allowed for a CPU-side phase (inputs, the numpy reference, judging)."""
    big_shape_bytes: float | None = None
    """Shapes moving more bytes than this run with the first seed only (bounds the CPU
    time of references in whole-suite checks); None: every shape gets every seed."""
    backend: str = "auto"
    """auto | pycuda | torch | fake (a named fake behaviour) | fake-sim (the CPU simulator)
    | emulate (the lowered CUDA on the CPU: no timing, no baseline, simulator shapes)."""
    baseline: bool = True
    fake_behaviour: str = "correct"
    fake_params: dict[str, Any] = field(default_factory=dict)
    fake_cost_ms: float | None = None
    fake_baseline_ms: float = 1.0
    gpu: str | None = None
    """Hardware-table GPU whose peaks set the floors (default: the device's)."""
    cache: Path | None = None
    startup_timeout: float = STARTUP_SECONDS
    emulate_timeout: float = EMULATE_TIMEOUT
    """`timeout` for an emulated launch (backend emulate)."""
    emulate_seed: int = 0
    """The scheduler seed of the first emulated launch (each next launch: one more)."""
    cu: str | None = None
    """Run this CUDA translation unit instead of the kernel's lowering (with the kernel's
    launch metadata): the agents' `cuda` arm, where a model edits the .cu directly."""
    reference_cache: Path | None = None
    """A directory where each shape's inputs and numpy reference are kept for the next
    candidate on that shape (`cake_core/run/refcache.py`); None: computed every time."""
    emulate_order: str = "both"
    """When emulated asynchronous operations complete: `lazy`, `eager`, or `both` (the first
    launch on each input set lazily, the second eagerly; `cake_core.run.emulated`)."""


@dataclass
class BenchOutcome:
    report: BenchReport
    diagnostics: list[Diagnostic]
    source: SourceFile
    elapsed_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.report.passed and not any(d.severity.value == "error"
                                              for d in self.diagnostics)


@dataclass
class _Candidate:
    source: SourceFile
    kernel: Any
    entry: KernelEntry | None
    rename: dict[str, str]
    specs: list[Any]
    spec: dict[str, Any]
    """The worker's kernel spec."""


def load_kernel(path: Path, kernel_name: str | None, task: Task) -> tuple[SourceFile, Any, list]:
    """Check the file and pick the kernel (by name, the only one, or the task's)."""
    # start-up: without a GPU `cake bench` and `cake run` stop before this, without
    # loading the compiler (~75 ms)
    from cake_core.check import check_source

    try:
        src = SourceFile.read(path, display_path(path))
    except OSError as exc:
        raise BenchSetupError(f"cannot read {path}: {exc.strerror}") from exc
    static = check_source(src)
    fatal = [d for d in static.diagnostics if d.severity.value == "error"
             and d.code[:3] not in ("CK2", "CK3", "CK4")]
    if static.program is None or fatal:
        raise BenchSetupError(f"{src.path} has errors; fix them before running it",
                              static.diagnostics)
    kernels = static.program.kernels
    if kernel_name:
        found = [k for k in kernels if k.name == kernel_name]
        if not found:
            names = ", ".join(k.name for k in kernels) or "none"
            raise BenchSetupError(f"{src.path} has no kernel {kernel_name!r} (it defines "
                                  f"{names})")
        return src, found[0], list(static.diagnostics)
    if len(kernels) == 1:
        return src, kernels[0], list(static.diagnostics)
    matching = [k for k in kernels if k.name in {e.kernel for e in task.kernels}]
    if len(matching) == 1:
        return src, matching[0], list(static.diagnostics)
    names = ", ".join(k.name for k in kernels)
    raise BenchSetupError(f"{src.path} defines {len(kernels)} kernels ({names}); pick one: "
                          f"{src.path}::NAME")


def _prepare(path: Path, kernel_name: str | None, task: Task, opts: BenchOptions,
             device_cc: tuple[int, int] | None) -> tuple[_Candidate, list[Diagnostic]]:
    src, kernel, static = load_kernel(path, kernel_name, task)
    entry = task.entry(kernel.name, path)
    rename = dict(entry.params) if entry is not None else {}
    diags: list[Diagnostic] = [d for d in static if d.severity.value != "error"]
    if opts.backend == "fake-sim":
        spec = {"kind": "sim", "source": str(path.resolve()), "name": kernel.name}
        if opts.fake_cost_ms is not None:
            spec["cost_ms"] = opts.fake_cost_ms
        return _Candidate(src, kernel, entry, rename, specs_from_kernel(kernel), spec), static
    if opts.backend == "fake":
        spec = {"kind": "fake", "source": str(path.resolve()), "name": kernel.name,
                "behaviour": opts.fake_behaviour, "params": opts.fake_params,
                "cost_ms": opts.fake_cost_ms}
        return _Candidate(src, kernel, entry, rename, specs_from_kernel(kernel), spec), static
    # start-up: runs on a fake device never build, so they skip the lowering (~35 ms)
    from cake_core.lower.toolchain import BuildError

    emulate = opts.backend == EMULATE
    if emulate:
        from cake_core.run.emulated import emulated_spec, emulation_unavailable

        why = emulation_unavailable()
        if why is not None:
            raise BenchSetupError(why)
    cu, meta = _lower(src, kernel)
    if opts.cu is not None:
        cu = opts.cu
    try:
        if emulate:
            spec = emulated_spec(cu, meta, kernel.name, seed=opts.emulate_seed,
                                 order=opts.emulate_order, cache=opts.cache)
        else:
            from cake_core.run.build import build_library, nvcc_target

            target = nvcc_target(kernel.arch, device_cc)
            lib = build_library(cu, target, name=kernel.name, cache=opts.cache)
            spec = {"kind": "cuda", "library": str(lib.path), "meta": meta, "target": target}
    except BuildError as exc:
        notes = [exc.log[-4000:]] if exc.log else []
        diag = codes.CUDA_COMPILE_ERROR.at(kernel.name_span, str(exc), notes=notes
                                           ).with_path(src.path)
        raise BenchSetupError(str(exc), [diag], exit=1) from exc
    return _Candidate(src, kernel, entry, rename, specs_from_meta(meta), spec), diags


def _lower(src: SourceFile, kernel: Any) -> tuple[str, dict[str, Any]]:
    """The .cu text and the kernel's launch metadata; BenchSetupError when it does not lower."""
    from cake_core.lower import lower_source

    lowered = lower_source(src, kernel=kernel.name)
    if not lowered.ok or not lowered.kernels:
        errors = [d for d in lowered.diagnostics if d.severity.value == "error"]
        raise BenchSetupError(f"{src.path}: `{kernel.name}` could not be lowered to CUDA",
                              errors or lowered.diagnostics, exit=1)
    return lowered.cu or "", lowered.kernels[0].meta


def bench(path: str | Path, kernel_name: str | None, task: Task,
          opts: BenchOptions | None = None,
          on_event: Callable[[dict[str, Any]], None] | None = None) -> BenchOutcome:
    """Run one candidate on a task's shapes under the full protocol, in a subprocess."""
    opts = opts or BenchOptions()
    t0 = time.perf_counter()
    path = Path(path)
    fake = opts.backend in ("fake", "fake-sim")
    emulate = opts.backend == EMULATE
    timing = TimingConfig(enabled=False) if emulate else opts.timing
    if fake:
        device_name, cc, l2 = "fake GPU", (9, 0), 1 << 20
    elif emulate:
        device_name, cc, l2 = "the CPU (emulated)", (0, 0), 0
    else:
        probe = probe_gpu()
        if not probe.present:
            raise NoGpuError(f"no CUDA device: {probe.reason}")
        found = available_backends()
        if not found or (opts.backend != "auto" and opts.backend not in found):
            want = "pycuda or torch" if opts.backend == "auto" else opts.backend
            raise NoGpuError(f"no CUDA device backend: {want} is not installed "
                             "(`pip install cake-kernels[gpu]` for pycuda)")
        device_name, cc, l2 = probe.name, probe.compute_capability, probe.l2_bytes
    cand, diags = _prepare(path, kernel_name, task, opts, None if fake or emulate else cc)
    if emulate:  # peaks for the workload figures: the kernel's own architecture's
        device_name = str(cand.spec["device"])
        arch = get_arch(cand.kernel.arch)
        cc = arch.compute_capability if arch is not None else (9, 0)
    gpu = get_gpu(opts.gpu) if opts.gpu else None
    if opts.gpu and gpu is None:
        raise BenchSetupError(f"unknown GPU {opts.gpu!r}")
    gpu = gpu or device_gpu(device_name, cc)
    known = gpu_for_device(device_name) if not (fake or emulate) else None
    shapes = list(opts.shapes) if opts.shapes is not None else list(
        task.shapes_for(cand.entry, sim=emulate))
    items = []
    for i, s in enumerate(shapes):
        try:
            wl = workload(task, cand.kernel, cand.specs, s.dims, gpu)
        except RunSetupError as exc:  # a shape the kernel cannot take: before any launch
            given = ",".join(f"{k}={v}" for k, v in s.dims.items())
            raise BenchSetupError(f"shape {given}: {exc}") from exc
        item = {"index": i, "dims": dict(s.dims), "label": s.label, "workload": wl.to_json()}
        if opts.big_shape_bytes is not None and wl.bytes > opts.big_shape_bytes:
            item["seeds"] = list(opts.seeds[:1])
        items.append(item)
    flush = 2 * max(l2, gpu.l2_bytes if not fake else 0)
    spec = {
        "task": task.path, "backend": opts.backend, "kernel": cand.spec,
        "rename": cand.rename, "seeds": list(opts.seeds), "flush_bytes": flush,
        "timing": {"warmup": timing.warmup, "rounds": timing.rounds,
                   "calls": timing.calls, "enabled": timing.enabled},
        "baseline": ({"kind": "none"} if not opts.baseline or emulate else
                     {"kind": "fake", "cost_ms": opts.fake_baseline_ms} if fake else
                     {"kind": "auto"}),
        "fake": {"device": device_name, "l2_bytes": l2},
        "reference_cache": str(opts.reference_cache) if opts.reference_cache else None,
    }
    limit = opts.emulate_timeout if emulate else opts.timeout
    results, info = run_in_workers(spec, items, _Limits(limit, opts.host_timeout,
                                                        opts.startup_timeout), on_event)
    backend = str(info.get("backend") or opts.backend)
    notes = []
    if emulate:
        from cake_core.run.emulated import order_note

        notes.append(f"emulated on the CPU (host compiler {cand.spec['compiler']}): "
                     "correctness only, no timing")
        notes.append(order_note(str(cand.spec.get("order", opts.emulate_order))))
    if timing.enabled and opts.baseline and not info.get("baseline") and not fake:
        notes.append(f"baseline not timed (torch is not installed or the task has no "
                     f"implementation in cake_core/run/baselines.py): {task.baseline}")
    if fake:
        notes.append("fake device: correctness is real, times are a virtual clock")
    report = BenchReport(task.name, cand.kernel.name, cand.source.path, backend,
                         str(info.get("device") or device_name),
                         None if fake or emulate else (known.name if known else None),
                         results, timing=timing.enabled, notes=notes)
    diags += findings_to_diagnostics(report, cand.kernel.name_span, cand.source.path,
                                     cand.source)
    return BenchOutcome(report, sort_diagnostics(diags), cand.source,
                        time.perf_counter() - t0)


def findings_to_diagnostics(report: BenchReport, span: Any, path: str,
                            source: SourceFile | None = None) -> list[Diagnostic]:
    """Each finding at `span` (the kernel's name), or at its own line of `source` when it
    names one in that file (emulated launches know the statement at fault)."""
    # start-up: the lowering's line helper is needed only for located findings
    from cake_core.lower.ptxas import line_span

    out = []
    for s in report.shapes:
        for f in s.findings:
            rule = codes.lookup(f.code) or codes.GPU_RUNTIME_ERROR
            at = span
            if f.line and source is not None and _same_file(f.file or path, source.path):
                at = line_span(source, f.line)
            out.append(rule.at(at, f.message, notes=f.notes, data=f.data).with_path(path))
        if s.suspicious:
            why = []
            if FLAG_BELOW_FLOOR in s.flags and s.floor_ms is not None:
                why.append(f"{s.candidate_ms:.4g} ms is below the roofline floor "
                           f"{s.floor_ms:.4g} ms for {s.dims_text}")
            if FLAG_TOO_FAST in s.flags and s.speedup is not None:
                why.append(f"{s.speedup:.1f}x faster than the baseline (more than "
                           f"{MAX_SPEEDUP:g}x) for {s.dims_text}")
            out.append(codes.GPU_SUSPICIOUS_TIMING.at(
                span, "suspicious timing: " + "; ".join(why),
                notes=["such a time usually means skipped work, a cached result or a warm "
                       "cache, not a fast kernel; it is left out of calibration data"],
                data={"dims": dict(s.dims), "candidate_ms": s.candidate_ms,
                      "floor_ms": s.floor_ms, "baseline_ms": s.baseline_ms}).with_path(path))
    return out


def _same_file(a: str, b: str) -> bool:
    """`#line` names the file as the lowering was given it; compare what is comparable."""
    if a == b:
        return True
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


# --- the subprocess ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Limits:
    device: float
    """Seconds without progress while the GPU works."""
    host: float = 900.0
    """... while the worker computes on the CPU (inputs, reference, judging)."""
    startup: float = STARTUP_SECONDS

    def after(self, ev: dict[str, Any]) -> float:
        return max(self.device, self.host) if ev.get("host") else self.device


def run_in_workers(spec: dict[str, Any], items: list[dict[str, Any]], limits: _Limits,
                   on_event: Callable[[dict[str, Any]], None] | None = None
                   ) -> tuple[list[ShapeResult], dict[str, Any]]:
    """Run every shape, a fresh worker after each timeout, crash or lost device."""
    results: dict[int, ShapeResult] = {}
    info: dict[str, Any] = {}
    todo = list(items)
    timeouts = 0
    while todo:
        outcome = _one_worker({**spec, "shapes": todo}, limits, on_event)
        info.update(outcome.ready)
        for idx, res in outcome.results.items():
            results[idx] = res
        by_index = {int(it["index"]): it for it in todo}
        todo = [it for it in todo if int(it["index"]) not in results]
        if not todo:
            break
        if outcome.setup_error is not None:  # every shape would fail the same way
            for it in todo:
                results[int(it["index"])] = _failed(it, "error", outcome.setup_error,
                                                    "CK705")
            break
        cur = outcome.current
        if cur is None or cur not in by_index:
            # died before starting a shape: blame the first one left, so the loop ends
            cur = int(todo[0]["index"])
        it = by_index[cur]
        if outcome.timed_out:
            timeouts += 1
            phase = f" during {outcome.phase}" if outcome.phase else ""
            msg = (f"no progress for {outcome.limit:g} s{phase}; the candidate's process group "
                   "was killed")
            results[cur] = _failed(it, "timeout", msg, "CK706")
        elif cur not in results:
            results[cur] = _failed(it, "crash", outcome.crash_message(), "CK705")
        todo = [x for x in todo if int(x["index"]) not in results]
        if timeouts >= MAX_TIMEOUTS:
            for x in todo:
                results[int(x["index"])] = _failed(
                    x, "skipped", f"skipped: the candidate hung {timeouts} times", None)
            break
    ordered = [results[int(it["index"])] for it in items]
    return ordered, info


def _failed(item: dict[str, Any], status: str, message: str, code: str | None) -> ShapeResult:
    wl = item.get("workload")
    res = ShapeResult({k: int(v) for k, v in item["dims"].items()}, str(item.get("label", "")),
                      status=status, correct=False, error=message,
                      workload=Workload.from_json(wl) if wl else None)
    if code is not None:
        dims = ",".join(f"{k}={v}" for k, v in res.dims.items())
        res.findings.append(Finding(code, f"{message} ({dims})", [], {"dims": dict(res.dims)}))
    return res


@dataclass
class _WorkerOutcome:
    results: dict[int, ShapeResult] = field(default_factory=dict)
    ready: dict[str, Any] = field(default_factory=dict)
    current: int | None = None
    phase: str = ""
    timed_out: bool = False
    returncode: int | None = None
    setup_error: str | None = None
    stderr: str = ""
    limit: float = 0.0
    """The no-progress allowance in force when the worker was killed."""

    def crash_message(self) -> str:
        rc = self.returncode
        if rc is not None and rc < 0:
            try:
                how = f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                how = f"killed by signal {-rc}"
        elif rc == 3:
            how = "stopped after a GPU fault"
        else:
            how = f"exited with status {rc}"
        tail = self.stderr.strip().splitlines()[-6:]
        phase = f" during {self.phase}" if self.phase else ""
        return f"the candidate's process {how}{phase}" + (
            ": " + " | ".join(tail) if tail else "")


def _one_worker(spec: dict[str, Any], limits: _Limits,
                on_event: Callable[[dict[str, Any]], None] | None) -> _WorkerOutcome:
    out = _WorkerOutcome()
    with tempfile.TemporaryDirectory(prefix="cake-run-") as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        err_path = Path(tmp) / "stderr.txt"
        r, w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("PYTHONUNBUFFERED", "1")
        with err_path.open("wb") as err:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "cake_core.run.worker", str(spec_path),
                     "--events-fd", str(w)],
                    stdin=subprocess.DEVNULL, stdout=err, stderr=err, pass_fds=(w,),
                    start_new_session=True, env=env, cwd=str(ROOT))
            finally:
                os.close(w)
            try:
                _watch(proc, r, out, limits, on_event)
                if not out.timed_out:
                    try:  # the pipe closed: the worker is exiting
                        proc.wait(timeout=max(limits.device, 1.0))
                    except subprocess.TimeoutExpired:
                        out.timed_out = True
            finally:
                os.close(r)
                if proc.poll() is None:
                    _kill(proc)
                out.returncode = proc.wait()
        out.stderr = err_path.read_text(encoding="utf-8", errors="replace")[-8000:]
    return out


def _watch(proc: subprocess.Popen[bytes], fd: int, out: _WorkerOutcome, limits: _Limits,
           on_event: Callable[[dict[str, Any]], None] | None) -> None:
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    buf = b""
    out.limit = max(limits.device, limits.startup)
    deadline = time.monotonic() + out.limit
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                out.timed_out = True
                _kill(proc)
                return
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return  # the worker closed its end: it exited
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    continue
                out.limit = limits.after(ev)
                deadline = time.monotonic() + out.limit
                _handle(ev, out)
                if on_event is not None:
                    on_event(ev)
    finally:
        sel.close()


def _handle(ev: dict[str, Any], out: _WorkerOutcome) -> None:
    kind = ev.get("event")
    if kind == "ready":
        out.ready = {k: v for k, v in ev.items() if k != "event"}
    elif kind == "start":
        out.current, out.phase = int(ev["index"]), "setup"
    elif kind == "progress":
        out.current, out.phase = int(ev["index"]), str(ev.get("phase", ""))
    elif kind == "shape":
        res = ShapeResult.from_json(ev["result"])
        res.assess()
        out.results[int(ev["index"])] = res
        out.phase = ""
    elif kind == "error":
        out.setup_error = str(ev.get("message", "the worker failed"))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's whole process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # an unkillable process: give up
        proc.wait(timeout=30)
