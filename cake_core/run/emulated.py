"""A lowered kernel built for the CPU (`cake_core.emulate`), launched like a GPU one.

`EmulatedKernel` is a `CudaKernel`: the same launcher symbol, the same argument marshalling,
the same error strings.  Around each launch it does what the emulation contract adds
(docs/emulation.md): it seeds the runtime's scheduler, registers the launch's buffers so
the runtime can bounds-check global accesses, and reads the runtime's report afterwards.
A launch the runtime did not finish cleanly (a deadlock, an out-of-bounds access, a race
it provoked) raises `EmulationError`, a `LaunchError` whose message carries the findings,
so the verification protocol reports it as it reports any failed launch (CK705).
`locate` then turns that one finding into one per emulator finding at its .cake line.

Each launch uses the next scheduler seed (`seed`, `seed + 1`, ...): the protocol launches
every input set twice, so two interleavings are compared and a race that changes the
output shows up as a wrong or nondeterministic result even when nothing is flagged.

The runtime completes asynchronous operations (TMA, cp.async, wgmma, bulk stores) in one
of two orders: lazily, deferred until the scheduler picks them or a wait needs them, or
eagerly, at issue (`EAGER`).  Lazy completion catches a read before the wait that makes
the data visible; eager completion catches a copy that overwrites a stage before its
readers released it.  Order `both` (the
default) runs the first launch on each input set lazily and the second eagerly, rather than
one order per input set or both orders per launch: it costs no launch more than one order,
each input set's two outputs are compared across the two orders (a result that depends on
the order is flagged even when both are within tolerance), and both orders run even with a
single input set, as in the emulate gate of `cake evolve`.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake_core.emulate.build import (
    NoHostCompilerError,
    build_emulated,
    find_host_compiler,
    runtime_missing,
)
from cake_core.emulate.report import EmuReport, describe, parse_report, summary, thread_lines
from cake_core.run.device import Device, LaunchError
from cake_core.run.host_device import HostDevice
from cake_core.run.kernels import CudaKernel
from cake_core.run.protocol import CK_RUNTIME, CK_UNWRITTEN, CK_WRONG
from cake_core.run.results import Finding, ShapeResult
from cake_core.run.tensors import RunSetupError

#: The functions an emulation build exports besides the launcher.
ABI = ("cake_emu_configure", "cake_emu_register_buffer", "cake_emu_clear_buffers",
       "cake_emu_report")
#: Emulator findings a shape reports as diagnostics, at most (the rest are counted).
MAX_LOCATED = 8
#: The runtime's flag bit of eager completion (`cake_emu::EAGER` in runtime.h).
EAGER = 1
LAZY_ORDER, EAGER_ORDER, BOTH_ORDERS = "lazy", "eager", "both"
#: The values of `cake run --order` and of `EmulatedKernel(order=...)`.
ORDERS = (LAZY_ORDER, EAGER_ORDER, BOTH_ORDERS)
_ORDER_TEXT = {LAZY_ORDER: "lazy order (asynchronous operations complete when the scheduler "
                           "picks them or a wait needs them)",
               EAGER_ORDER: "eager order (asynchronous operations complete at issue)"}


@dataclass(frozen=True)
class EmulatedLaunch:
    """One launch of the current shape: which input set, which time on it, how it ran."""

    inputs: int
    """The input set, numbered in the order of their first launch (the protocol's order of
    its seeds)."""
    repeat: int
    """0 for the first launch on these inputs, 1 for the second, ..."""
    seed: int
    order: str

    def describe(self) -> str:
        return f"schedule seed {self.seed}, {self.order} order"


class EmulationError(LaunchError):
    """An emulated launch that failed; `report` holds the runtime's findings."""

    def __init__(self, message: str, report: EmuReport, seed: int, order: str = LAZY_ORDER,
                 head: str = "") -> None:
        super().__init__(message)
        self.report = report
        self.seed = seed
        self.order = order
        self.head = head or message
        """The message without the emulator's findings (they are reported at their lines)."""


class EmulatedKernel(CudaKernel):
    """A lowered kernel in a library from `cake_core.emulate.build_emulated`."""

    def __init__(self, library: str | Path, meta: Mapping[str, Any], *, seed: int = 0,
                 flags: int = 0, order: str = BOTH_ORDERS) -> None:
        super().__init__(library, meta)
        if flags & EAGER:
            raise RunSetupError("the completion order is chosen with order=, not with the "
                                "EAGER flag")
        if order not in ORDERS:
            raise RunSetupError(f"unknown emulation order {order!r} (one of "
                                f"{', '.join(ORDERS)})")
        missing = [name for name in ABI if not hasattr(self._lib, name)]
        if missing:
            raise RunSetupError(f"{library} is not an emulation build: it does not export "
                                f"{', '.join(missing)}")
        self._configure = self._lib.cake_emu_configure
        self._configure.argtypes = [ctypes.c_ulonglong, ctypes.c_int]
        self._configure.restype = None
        self._register = self._lib.cake_emu_register_buffer
        self._register.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
        self._register.restype = None
        self._clear = self._lib.cake_emu_clear_buffers
        self._clear.argtypes = []
        self._clear.restype = None
        self._report = self._lib.cake_emu_report
        self._report.argtypes = []
        self._report.restype = ctypes.c_char_p
        self.seed = int(seed)
        self.flags = int(flags)
        """The runtime's flags besides the order's bit, which `order` decides per launch."""
        self.order = order
        self.launches = 0
        self.shape_launches: list[EmulatedLaunch] = []
        """The launches since `start_shape`."""
        self._inputs: dict[str, int] = {}
        self.last_report: EmuReport | None = None
        self.failure: EmulationError | None = None
        """The last failed launch, until `locate` consumes it."""

    def report(self) -> EmuReport:
        return parse_report(self._report())

    def start_shape(self) -> None:
        """Forget the input sets seen: the next launch is a first launch on its inputs."""
        self.shape_launches = []
        self._inputs = {}

    def _next_launch(self, device: HostDevice, buffers: Mapping[str, Any]) -> EmulatedLaunch:
        """The seed and order of the next launch; the input set is known by the contents of
        the buffers (the protocol launches every input set from the same buffers, restaged
        and with the outputs poisoned, so equal contents mean the same input set)."""
        digest = hashlib.blake2b(digest_size=16)
        for buf in buffers.values():
            digest.update(device.download(buf, device.nbytes(buf)).data)
        key = digest.hexdigest()
        inputs = self._inputs.setdefault(key, len(self._inputs))
        repeat = sum(1 for ln in self.shape_launches if ln.inputs == inputs)
        order = self.order
        if order == BOTH_ORDERS:
            order = LAZY_ORDER if repeat == 0 else EAGER_ORDER
        launch = EmulatedLaunch(inputs, repeat, self.seed + self.launches, order)
        self.launches += 1
        self.shape_launches.append(launch)
        return launch

    def launch(self, device: Device, buffers: Mapping[str, Any], dims: Mapping[str, int],
               scalars: Mapping[str, Any], stream: Any) -> None:
        if not isinstance(device, HostDevice):
            raise LaunchError("an emulated kernel runs only on host memory (HostDevice)")
        launch = self._next_launch(device, buffers)
        self._configure(launch.seed,
                        self.flags | (EAGER if launch.order == EAGER_ORDER else 0))
        self._clear()
        for buf in buffers.values():
            self._register(device.pointer(buf), device.nbytes(buf))
        try:
            super().launch(device, buffers, dims, scalars, stream)
            failed = ""
        except LaunchError as exc:
            failed = str(exc)
        report = self.last_report = self.report()
        if not failed and report.ok:
            return
        head = failed or f"{self.meta['launcher']} returned success but the emulator " \
                         "reported a problem"
        head = f"{head}; {launch.describe()}"
        found = summary(report)
        self.failure = EmulationError(
            head + (f"; the emulator found:\n{found}" if found else ""), report, launch.seed,
            launch.order, head)
        raise self.failure

    def locate(self, result: ShapeResult) -> None:
        """Replace the failed launch's finding with one per emulator finding, at its line,
        and name the schedule seed and order of each launch a wrong output came from.

        The shape's error keeps only its first line: the findings it listed are now
        diagnostics, and a report that printed both would show each twice."""
        self._name_launches(result)
        failure, self.failure = self.failure, None
        if failure is None or not failure.report.findings:
            return
        generic = [f for f in result.findings if f.code == CK_RUNTIME and not f.line]
        if not generic:
            return
        base = generic[0]
        dims = ",".join(f"{k}={v}" for k, v in result.dims.items())
        located = findings_for(failure.report, failure.seed, dims, base.data, failure.order)
        result.findings = [f for f in result.findings if f is not base] + located
        if result.error and failure.head != str(failure):
            n = len(failure.report.findings)
            result.error = (result.error.replace(str(failure), failure.head)
                            + f"; {n} emulator finding{'s' if n != 1 else ''}, each reported "
                            "at its line")

    def _name_launches(self, result: ShapeResult) -> None:
        """The protocol names a wrong output's input seed and launch ("first launch",
        "second launch"); add the schedule seed and order that launch ran under."""
        for f in result.findings:
            if f.code not in (CK_WRONG, CK_UNWRITTEN) or f.data.get("seed") not in result.seeds:
                continue
            repeat = {"first launch": 0, "second launch": 1}.get(str(f.data.get("when")))
            inputs = result.seeds.index(f.data["seed"])
            launch = next((ln for ln in self.shape_launches
                           if ln.inputs == inputs and ln.repeat == repeat), None)
            if launch is None:
                continue
            f.data.update(schedule_seed=launch.seed, order=launch.order)
            f.notes.append(f"emulated with schedule seed {launch.seed} in "
                           f"{_ORDER_TEXT[launch.order]}")
            first = next((ln for ln in self.shape_launches
                          if ln.inputs == inputs and ln.repeat == 0), None)
            if launch.repeat and first is not None and first.order != launch.order:
                # the protocol reports a second launch only when the first one was right
                f.notes.append(f"the first launch on these inputs, in {first.order} order, was "
                               "right: the result depends on when asynchronous operations "
                               "complete (a read before its wait, or a stage overwritten "
                               "before its readers released it)")


def emulation_unavailable() -> str | None:
    """Why this machine cannot emulate (no CPU runtime, no compiler), or None."""
    missing = runtime_missing()
    if missing is not None:
        return f"cannot emulate: {missing}"
    try:
        find_host_compiler()
    except NoHostCompilerError as exc:
        return str(exc)
    return None


def emulated_spec(cu: str, meta: Mapping[str, Any], name: str, *, seed: int = 0,
                  order: str = BOTH_ORDERS, cache: Path | None = None) -> dict[str, Any]:
    """Build `cu` for the CPU; the worker's spec of the kernel (kind `emulated`).

    Raises BuildError (with the compiler's log) when the code does not compile."""
    lib = build_emulated(cu, name=name, cache=cache)
    label = lib.compiler.label
    return {"kind": "emulated", "library": str(lib.path), "meta": dict(meta), "seed": seed,
            "flags": 0, "order": order, "compiler": label,
            "device": f"the CPU, emulated with {label}"}


def order_note(order: str) -> str:
    """How a run's launches completed asynchronous operations, for the report's notes."""
    if order == BOTH_ORDERS:
        return ("asynchronous operations complete lazily (when the scheduler picks them or a "
                "wait needs them) on the first launch of each input set and eagerly (at "
                "issue) on the second")
    return f"every launch in {_ORDER_TEXT[order]}"


def findings_for(report: EmuReport, seed: int, dims: str, data: Mapping[str, Any],
                 order: str = LAZY_ORDER) -> list[Finding]:
    """CK705 findings at the runtime's .cake lines, waiting threads in the notes."""
    out = []
    for f in report.findings[:MAX_LOCATED]:
        notes = thread_lines(f)
        notes.append(f"emulated on the CPU with schedule seed {seed} in {_ORDER_TEXT[order]}; "
                     "the same seed and order replay the same interleaving")
        out.append(Finding(CK_RUNTIME, f"emulated launch failed: {describe(f)} ({dims})",
                           notes, {**data, "emulator": f.to_json(), "seed": seed,
                                   "order": order},
                           file=f.file or None, line=f.line or None))
    rest = len(report.findings) - MAX_LOCATED
    if rest > 0:
        out[-1].notes.append(f"{rest} more emulator finding{'s' if rest > 1 else ''} not shown")
    return out


__all__ = ["ABI", "BOTH_ORDERS", "EAGER", "EAGER_ORDER", "LAZY_ORDER", "ORDERS",
           "EmulatedKernel", "EmulatedLaunch", "EmulationError", "emulated_spec",
           "emulation_unavailable", "findings_for", "order_note"]
