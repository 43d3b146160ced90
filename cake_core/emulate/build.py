"""Compiling a lowered .cu with the host C++ compiler into a library that runs on the CPU.

The command is fixed by the emulation contract (docs/emulation.md):

    $CXX -std=c++20 -O2 -fPIC -shared -DCAKE_EMULATE -Wno-unknown-pragmas \\
         -I cake_core/emulate/include -x c++ -o libK.so K.cu

The compiler is `$CXX` when set, else `g++`, else `clang++` on PATH.  Libraries are cached
beside the nvcc builds (`cake_core.lower.toolchain.build_cached_library`, under the cache
directory's `lib/`) by the SHA-256 of the source, the flags, the compiler and its version,
and the content of every file under `include/`: editing the runtime rebuilds every kernel,
and nothing else does.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cake_core.lower.toolchain import BuildError, build_cached_library, library_key

#: The CPU runtime: the headers a lowered .cu includes when CAKE_EMULATE is defined.
INCLUDE_DIR = Path(__file__).resolve().parent / "include"
#: The header whose absence means the runtime is not installed (the build would fail).
RUNTIME_HEADER = "cake_emulate.h"

EMULATE_FLAGS = ("-std=c++20", "-O2", "-fPIC", "-shared", "-DCAKE_EMULATE",
                 "-ffp-contract=off", "-Wno-unknown-pragmas", "-Wno-psabi")
COMPILERS = ("g++", "clang++")
NO_COMPILER = "no host C++ compiler (g++ or clang++) found; install one or set CXX"
#: Bumped when the way a library is built changes without its inputs changing.
_SALT = "cake-emulate-lib/1"


class NoHostCompilerError(BuildError):
    """No usable C++ compiler: a setup problem of the machine, not of the kernel."""


@dataclass(frozen=True)
class HostCompiler:
    command: tuple[str, ...]
    """The executable (resolved on PATH) and any arguments `$CXX` gave with it."""
    version: str
    """The first line of `--version` (part of cache keys)."""

    @property
    def name(self) -> str:
        return Path(self.command[0]).name

    @property
    def label(self) -> str:
        """`g++ 12.2.0`: the name and the version number, for reports."""
        numbers = re.findall(r"\b\d+\.\d+(?:\.\d+)?\b", self.version)
        return f"{self.name} {numbers[-1]}" if numbers else self.name


@dataclass(frozen=True)
class EmulatedLibrary:
    path: Path
    compiler: HostCompiler
    cached: bool


@lru_cache(maxsize=16)
def _version(executable: str) -> str:
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def find_host_compiler(env: Mapping[str, str] | None = None) -> HostCompiler:
    """`$CXX`, else g++, else clang++ on PATH; NoHostCompilerError when there is none.

    A `$CXX` that names no executable is an error rather than a reason to fall back: the
    user asked for that compiler.  `env` exists for tests.
    """
    env = os.environ if env is None else env
    path = env.get("PATH", "")
    cxx = env.get("CXX", "").strip()
    if cxx:
        try:
            words = shlex.split(cxx)
        except ValueError:
            words = []
        hit = shutil.which(words[0], path=path) if words else None
        if hit is None:
            raise NoHostCompilerError(f"CXX={cxx} is not an executable on PATH; "
                                      f"{NO_COMPILER}")
        return HostCompiler((hit, *words[1:]), _version(hit))
    for name in COMPILERS:
        hit = shutil.which(name, path=path)
        if hit is not None:
            return HostCompiler((hit,), _version(hit))
    raise NoHostCompilerError(NO_COMPILER)


def host_compiler_present() -> bool:
    """Whether `find_host_compiler` would find one: the guard of what only emulation needs
    (a test's skip, a script's early exit)."""
    try:
        find_host_compiler()
    except NoHostCompilerError:
        return False
    return True


def runtime_missing(include_dir: Path | None = None) -> str | None:
    """Why the CPU runtime cannot be used, or None when its header is installed."""
    inc = INCLUDE_DIR if include_dir is None else include_dir
    if (inc / RUNTIME_HEADER).is_file():
        return None
    return (f"the CPU emulation runtime is not installed ({RUNTIME_HEADER} is missing from "
            f"{inc})")


def headers_digest(include_dir: Path | None = None) -> str:
    """SHA-256 of every file under the include folder (relative names and bytes)."""
    inc = INCLUDE_DIR if include_dir is None else include_dir
    h = hashlib.sha256()
    if inc.is_dir():
        for f in sorted(p for p in inc.rglob("*") if p.is_file()):
            h.update(f.relative_to(inc).as_posix().encode())
            h.update(b"\0")
            h.update(f.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def compile_command(compiler: HostCompiler, include_dir: Path,
                    extra_flags: Sequence[str] = ()) -> list[str]:
    """Everything before `-o LIB SOURCE`; `-x c++` makes the .cu a C++ source."""
    return [*compiler.command, *EMULATE_FLAGS, *extra_flags, "-I", str(include_dir),
            "-x", "c++"]


def build_emulated(cu_text: str, *, name: str = "kernel",
                   compiler: HostCompiler | None = None, cache: Path | None = None,
                   include_dir: Path | None = None, extra_flags: Sequence[str] = (),
                   timeout: float = 600.0) -> EmulatedLibrary:
    """Compile `cu_text` for the CPU into a cached shared library.

    Raises NoHostCompilerError without a compiler and BuildError (with the compiler's
    log) when the code does not compile.
    """
    cxx = compiler or find_host_compiler()
    inc = INCLUDE_DIR if include_dir is None else include_dir
    key = library_key(cu_text, *EMULATE_FLAGS, *extra_flags, " ".join(cxx.command),
                      cxx.version, headers_digest(inc), _SALT)
    path, cached = build_cached_library(
        cu_text, compile_command(cxx, inc, extra_flags), key=key, name=name, variant="emu",
        purpose=f"for the CPU ({cxx.label})", cache=cache, timeout=timeout)
    return EmulatedLibrary(path, cxx, cached)


__all__ = ["COMPILERS", "EMULATE_FLAGS", "INCLUDE_DIR", "NO_COMPILER", "RUNTIME_HEADER",
           "BuildError", "EmulatedLibrary", "HostCompiler", "NoHostCompilerError",
           "build_emulated", "compile_command", "find_host_compiler", "headers_digest",
           "runtime_missing"]
