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
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
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
from cake_core.run.protocol import CK_RUNTIME
from cake_core.run.results import Finding, ShapeResult
from cake_core.run.tensors import RunSetupError

#: The functions an emulation build exports besides the launcher.
ABI = ("cake_emu_configure", "cake_emu_register_buffer", "cake_emu_clear_buffers",
       "cake_emu_report")
#: Emulator findings a shape reports as diagnostics, at most (the rest are counted).
MAX_LOCATED = 8


class EmulationError(LaunchError):
    """An emulated launch that failed; `report` holds the runtime's findings."""

    def __init__(self, message: str, report: EmuReport, seed: int) -> None:
        super().__init__(message)
        self.report = report
        self.seed = seed


class EmulatedKernel(CudaKernel):
    """A lowered kernel in a library from `cake_core.emulate.build_emulated`."""

    def __init__(self, library: str | Path, meta: Mapping[str, Any], *, seed: int = 0,
                 flags: int = 0) -> None:
        super().__init__(library, meta)
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
        self.launches = 0
        self.last_report: EmuReport | None = None
        self.failure: EmulationError | None = None
        """The last failed launch, until `locate` consumes it."""

    def report(self) -> EmuReport:
        return parse_report(self._report())

    def launch(self, device: Device, buffers: Mapping[str, Any], dims: Mapping[str, int],
               scalars: Mapping[str, Any], stream: Any) -> None:
        if not isinstance(device, HostDevice):
            raise LaunchError("an emulated kernel runs only on host memory (HostDevice)")
        seed = self.seed + self.launches
        self.launches += 1
        self._configure(seed, self.flags)
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
        found = summary(report)
        self.failure = EmulationError(
            f"{head}; schedule seed {seed}" + (f"; the emulator found:\n{found}" if found
                                               else ""), report, seed)
        raise self.failure

    def locate(self, result: ShapeResult) -> None:
        """Replace the failed launch's finding with one per emulator finding, at its line."""
        failure, self.failure = self.failure, None
        if failure is None or not failure.report.findings:
            return
        generic = [f for f in result.findings if f.code == CK_RUNTIME and not f.line]
        if not generic:
            return
        base = generic[0]
        dims = ",".join(f"{k}={v}" for k, v in result.dims.items())
        located = findings_for(failure.report, failure.seed, dims, base.data)
        result.findings = [f for f in result.findings if f is not base] + located


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
                  cache: Path | None = None) -> dict[str, Any]:
    """Build `cu` for the CPU; the worker's spec of the kernel (kind `emulated`).

    Raises BuildError (with the compiler's log) when the code does not compile."""
    lib = build_emulated(cu, name=name, cache=cache)
    label = lib.compiler.label
    return {"kind": "emulated", "library": str(lib.path), "meta": dict(meta), "seed": seed,
            "flags": 0, "compiler": label, "device": f"the CPU, emulated with {label}"}


def findings_for(report: EmuReport, seed: int, dims: str, data: Mapping[str, Any]
                 ) -> list[Finding]:
    """CK705 findings at the runtime's .cake lines, waiting threads in the notes."""
    out = []
    for f in report.findings[:MAX_LOCATED]:
        notes = thread_lines(f)
        notes.append(f"emulated on the CPU with schedule seed {seed}; the same seed replays "
                     "the same interleaving")
        out.append(Finding(CK_RUNTIME, f"emulated launch failed: {describe(f)} ({dims})",
                           notes, {**data, "emulator": f.to_json(), "seed": seed},
                           file=f.file or None, line=f.line or None))
    rest = len(report.findings) - MAX_LOCATED
    if rest > 0:
        out[-1].notes.append(f"{rest} more emulator finding{'s' if rest > 1 else ''} not shown")
    return out


__all__ = ["ABI", "EmulatedKernel", "EmulationError", "emulated_spec", "emulation_unavailable",
           "findings_for"]
