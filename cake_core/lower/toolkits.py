"""Which installed CUDA toolkit to build with, given the driver that will run the result.

A machine often holds several toolkits (`/usr/local/cuda-12.8`, `/usr/local/cuda-13.0`, the
`nvidia-cuda-nvcc` wheel, whatever `nvcc` PATH finds first).  The newest one is the best
compiler, but a library built by a toolkit newer than the driver may not load: the CUDA
runtime it links refuses to start (`cudaErrorInsufficientDriver`).  So the choice is the
newest toolkit whose CUDA version is at most the driver's; when none is, the newest of the
driver's major version (CUDA's minor-version compatibility lets it run cubins, which is all
the runner loads); failing that, nothing, and the caller keeps its default.

`find_toolchain` (toolchain.py) takes `nvcc` from PATH first, so a caller applies the
choice by putting `Toolkit.bin_dir` at the front of PATH.  Nothing here needs a GPU: the
driver's version comes from `cuDriverGetVersion` through ctypes, else from `nvidia-smi`.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cake_core.lower.toolchain import WHEEL_BIN_DIRS, _site_dirs, _version

Version = tuple[int, int]

#: Where toolkits are installed by NVIDIA's packages (`cuda-X.Y` beside a `cuda` link).
TOOLKIT_ROOTS = (Path("/usr/local"), Path("/opt"))


@dataclass(frozen=True)
class Toolkit:
    nvcc: Path
    version: Version
    where: str
    """How it was found: `/usr/local/cuda-*`, `PATH`, `CUDA_HOME`, `wheel`."""
    full: bool = False
    """nvcc sits in a toolkit tree (its `nvvm/` beside `bin/`), not a wrapper script on
    PATH: preferred among toolkits of the same version, so CUDA_HOME means something."""

    @property
    def bin_dir(self) -> Path:
        return self.nvcc.parent

    @property
    def text(self) -> str:
        return f"CUDA {self.version[0]}.{self.version[1]}"


@dataclass(frozen=True)
class Choice:
    toolkit: Toolkit | None
    reason: str
    """One sentence: which toolkit and why (or why none)."""


def parse_release(text: str) -> Version | None:
    """(13, 0) from `nvcc --version`'s `release 13.0, V13.0.88` or a bare `13.0.88`."""
    m = re.search(r"release (\d+)\.(\d+)", text) or re.search(r"\bV?(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _toolkit_version(nvcc: Path, run_version: Callable[[str], str]) -> Version | None:
    """The toolkit's `version.json` (CUDA >= 11.1) when it sits beside bin/, else nvcc's
    own `--version` (wheels and trimmed installs ship no version.json)."""
    meta = nvcc.parent.parent / "version.json"
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
        found = parse_release(str(data["cuda"]["version"]))
        if found is not None:
            return found
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return parse_release(run_version(str(nvcc)))


def _candidates(env: Mapping[str, str], roots: Sequence[Path],
                site_dirs: Sequence[Path]) -> Iterable[tuple[Path, str]]:
    hit = shutil.which("nvcc", path=env.get("PATH", ""))
    if hit:
        yield Path(hit), "PATH"
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            yield Path(env[var]) / "bin" / "nvcc", var
    for root in roots:
        for d in sorted(root.glob("cuda*")):
            yield d / "bin" / "nvcc", f"{root}/cuda*"
    for d in site_dirs:
        for sub in WHEEL_BIN_DIRS:
            yield Path(d) / sub / "nvcc", "wheel"


def installed_toolkits(env: Mapping[str, str] | None = None,
                       roots: Sequence[Path] = TOOLKIT_ROOTS,
                       site_dirs: Sequence[Path] | None = None,
                       run_version: Callable[[str], str] = _version) -> list[Toolkit]:
    """Every distinct nvcc found (symlinks resolved), newest first, whole toolkits before
    wrappers of the same version.  `env`, `roots`, `site_dirs` and `run_version` exist for
    tests."""
    env = os.environ if env is None else env
    seen: set[Path] = set()
    out: list[Toolkit] = []
    for nvcc, where in _candidates(env, roots, site_dirs if site_dirs is not None
                                   else _site_dirs()):
        if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
            continue
        real = nvcc.resolve()
        if real in seen:
            continue
        seen.add(real)
        version = _toolkit_version(real, run_version)
        if version is not None:
            full = (nvcc.parent.parent / "nvvm").is_dir()
            out.append(Toolkit(nvcc, version, where, full))
    return sorted(out, key=_rank, reverse=True)


def _rank(t: Toolkit) -> tuple[Version, bool]:
    return t.version, t.full


def driver_version_from_int(v: int) -> Version:
    """cuDriverGetVersion's 13000 -> (13, 0), 12080 -> (12, 8)."""
    return v // 1000, (v % 1000) // 10


DRIVER_LIBRARIES = ("libcuda.so.1", "libcuda.so")


def driver_cuda_version(smi: Callable[[], str] | None = None,
                        libraries: Sequence[str] = DRIVER_LIBRARIES) -> Version | None:
    """The newest CUDA the installed driver supports (`cuDriverGetVersion`, else the
    `CUDA Version:` of `nvidia-smi`), or None without a driver.  `smi` and `libraries`
    exist for tests."""
    for name in libraries:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int(0)
        try:
            if lib.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value > 0:
                return driver_version_from_int(int(v.value))
        except AttributeError:
            continue
    text = (smi or _nvidia_smi)()
    m = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20,
                              check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def choose_toolkit(toolkits: Sequence[Toolkit], driver: Version | None) -> Choice:
    """The newest toolkit the driver supports (see the module docstring)."""
    kits = sorted(toolkits, key=_rank, reverse=True)
    if not kits:
        return Choice(None, "no CUDA toolkit found (no nvcc on PATH, in CUDA_HOME, under "
                            "/usr/local/cuda-*, or from the nvidia-cuda-nvcc wheel)")
    listed = ", ".join(f"{t.text} ({t.nvcc})" for t in kits)
    if driver is None:
        best = kits[0]
        return Choice(best, f"{best.text} at {best.bin_dir}: the newest of {listed}; the "
                            "driver's CUDA version is unknown")
    dtext = f"CUDA {driver[0]}.{driver[1]}"
    fits = [t for t in kits if t.version <= driver]
    if fits:
        best = fits[0]
        newer = [t.text for t in kits if t.version > driver]
        skipped = f"; {', '.join(newer)} is newer than the driver" if newer else ""
        return Choice(best, f"{best.text} at {best.bin_dir}: the newest toolkit the driver "
                            f"supports (driver: {dtext}; found: {listed}){skipped}")
    same = [t for t in kits if t.version[0] == driver[0]]
    if same:
        oldest = min(t.version for t in same)
        best = next(t for t in same if t.version == oldest)
        return Choice(best, f"{best.text} at {best.bin_dir}: every toolkit is newer than "
                            f"the driver ({dtext}); the oldest of its major version, relying "
                            f"on minor-version compatibility (found: {listed})")
    return Choice(None, f"no toolkit fits the driver ({dtext}); found: {listed}")


__all__ = ["Choice", "Toolkit", "choose_toolkit", "driver_cuda_version",
           "driver_version_from_int", "installed_toolkits", "parse_release"]
