"""Running the CUDA that `cake lower` emits on the CPU, for machines without a GPU.

The lowered .cu compiles two ways: with nvcc for the GPU, and with the host C++ compiler
and `-DCAKE_EMULATE` against the CPU runtime in `include/cake_emulate.h`, which runs every
CUDA thread of the grid as a fiber under a seeded scheduler.  The kernel body and launcher
are the same text in both builds, so a mistake in the generated code (a descriptor bit, a
fragment index, a tensor-map stride) shows up here, where the IR simulator cannot see it.

This package is the host side of that contract (docs/emulation.md): finding a compiler,
building and caching the library (`build`), and reading the runtime's report of a launch
(`report`).  Running a library under the verification protocol is the runner's job
(`cake_core.run.emulated`, `cake_core.run.host_device`).
"""

from __future__ import annotations

from cake_core.emulate.build import (
    EMULATE_FLAGS,
    INCLUDE_DIR,
    NO_COMPILER,
    RUNTIME_HEADER,
    EmulatedLibrary,
    HostCompiler,
    NoHostCompilerError,
    build_emulated,
    find_host_compiler,
    headers_digest,
    host_compiler_present,
    runtime_missing,
)
from cake_core.emulate.report import EmuFinding, EmuReport, EmuThread, parse_report

__all__ = ["EMULATE_FLAGS", "INCLUDE_DIR", "NO_COMPILER", "RUNTIME_HEADER", "EmuFinding",
           "EmuReport", "EmuThread", "EmulatedLibrary", "HostCompiler", "NoHostCompilerError",
           "build_emulated", "find_host_compiler", "headers_digest", "host_compiler_present",
           "parse_report", "runtime_missing"]
