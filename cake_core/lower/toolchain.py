"""Finding nvcc/ptxas, compiling generated CUDA to a cubin, and caching the result.

Discovery order: `nvcc` on PATH, then `$CUDA_HOME/bin` and `$CUDA_PATH/bin`, then the
`nvidia-cuda-nvcc` wheel (`nvidia/cu13/bin/nvcc`, or the older `nvidia/cuda_nvcc/bin`)
in any `site-packages` of this interpreter.  Compiles are cached by content hash (source,
flags and toolchain version) under `~/.cache/cake/` (or `$CAKE_CACHE_DIR`), so a second
`cake compile` of an unchanged kernel costs no nvcc run.  Nothing here needs a GPU.

`build_cached_library` is the one way a lowered .cu becomes a shared library, whichever
compiler builds it (nvcc for the GPU runner, the host C++ compiler for CPU emulation):
both cache by content under `lib/` and must fail the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

NOT_FOUND = ("nvcc not found: install the CUDA toolkit (and put its bin/ on PATH or set "
             "CUDA_HOME) or `pip install nvidia-cuda-nvcc`; `cake lower` needs no compiler")

#: Where the PyPI wheels put the compiler, relative to a site-packages directory.
WHEEL_BIN_DIRS = ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin", "nvidia/cu12/bin")


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    ptxas: Path | None
    version: str
    """`release 13.0, V13.0.88` style text from `nvcc --version` (part of cache keys)."""

    @property
    def bin_dir(self) -> Path:
        return self.nvcc.parent


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def _site_dirs() -> list[Path]:
    dirs: list[str] = []
    with contextlib.suppress(AttributeError):  # some embedded interpreters lack it
        dirs.extend(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        dirs.append(site.getusersitepackages())
    dirs.extend(p for p in sys.path if p.endswith("site-packages"))
    seen: list[Path] = []
    for d in dirs:
        p = Path(d)
        if p not in seen:
            seen.append(p)
    return seen


def find_nvcc(env: Mapping[str, str] | None = None,
              site_dirs: Sequence[Path] | None = None) -> Path | None:
    """The nvcc to use, or None.  `env` and `site_dirs` exist for tests."""
    env = os.environ if env is None else env
    hit = shutil.which("nvcc", path=env.get("PATH", ""))
    if hit:
        return Path(hit)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = env.get(var)
        if home and _executable(Path(home) / "bin" / "nvcc"):
            return Path(home) / "bin" / "nvcc"
    for d in (site_dirs if site_dirs is not None else _site_dirs()):
        for sub in WHEEL_BIN_DIRS:
            cand = Path(d) / sub / "nvcc"
            if _executable(cand):
                return cand
    return None


def find_ptxas(nvcc: Path, env: Mapping[str, str] | None = None) -> Path | None:
    """ptxas next to nvcc, else on PATH."""
    env = os.environ if env is None else env
    cand = nvcc.parent / "ptxas"
    if _executable(cand):
        return cand
    hit = shutil.which("ptxas", path=env.get("PATH", ""))
    return Path(hit) if hit else None


@lru_cache(maxsize=8)
def _version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [ln.strip() for ln in out.stdout.splitlines() if "release" in ln or ln.startswith("V")]
    return lines[-1] if lines else (out.stdout.strip().splitlines() or ["unknown"])[-1]


def find_toolchain(env: Mapping[str, str] | None = None) -> Toolchain | None:
    nvcc = find_nvcc(env)
    if nvcc is None:
        return None
    return Toolchain(nvcc, find_ptxas(nvcc, env), _version(str(nvcc)))


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    override = env.get("CAKE_CACHE_DIR")
    if override:
        return Path(override)
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "cake"


def arch_flag(arch: str) -> str:
    return f"-arch={arch}"


def compile_flags(arch: str, extra: Sequence[str] = ()) -> list[str]:
    return [arch_flag(arch), "-cubin", "-std=c++17", "-Xptxas", "-v", "-lineinfo", *extra]


@dataclass
class CompileResult:
    ok: bool
    cubin: bytes | None
    log: str
    """nvcc's and ptxas's combined output (ptxas -v included)."""
    flags: list[str]
    key: str
    cached: bool
    seconds: float
    cu_name: str
    toolchain: Toolchain
    returncode: int = 0
    extra: dict[str, object] = field(default_factory=dict)


def cache_key(cu: str, flags: Sequence[str], tc: Toolchain) -> str:
    h = hashlib.sha256()
    for part in (cu, "\0".join(flags), tc.version, "cake-compile/1"):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def compile_cu(cu: str, arch: str, *, cu_name: str = "kernel.cu",
               toolchain: Toolchain | None = None, cache: Path | None = None,
               use_cache: bool = True, extra_flags: Sequence[str] = (),
               timeout: float = 600) -> CompileResult:
    """nvcc `cu` to a cubin for `arch`; the result (and its log) is cached by content."""
    tc = toolchain or find_toolchain()
    if tc is None:
        raise FileNotFoundError(NOT_FOUND)
    flags = compile_flags(arch, extra_flags)
    key = cache_key(cu, [*flags, cu_name], tc)
    root = cache if cache is not None else cache_dir()
    entry = root / key[:2] / key
    if use_cache and (entry / "result.json").is_file():
        try:
            meta = json.loads((entry / "result.json").read_text(encoding="utf-8"))
            cubin_path = entry / "kernel.cubin"
            cubin = cubin_path.read_bytes() if cubin_path.is_file() else None
            return CompileResult(bool(meta["ok"]), cubin, str(meta["log"]), flags, key, True, 0.0,
                                 cu_name, tc, int(meta.get("returncode", 0)))
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry is recompiled
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cake-nvcc-") as tmp:
        src = Path(tmp) / cu_name
        src.write_text(cu, encoding="utf-8")
        out = Path(tmp) / "kernel.cubin"
        env = dict(os.environ)
        env["PATH"] = f"{tc.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        try:
            proc = subprocess.run([str(tc.nvcc), *flags, "-o", str(out), cu_name], cwd=tmp,
                                  capture_output=True, text=True, timeout=timeout, check=False,
                                  env=env)
            log = (proc.stdout + proc.stderr).replace(tmp + "/", "")
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            log, rc = f"nvcc timed out after {timeout:.0f} s", 124
        cubin = out.read_bytes() if rc == 0 and out.is_file() else None
    seconds = time.perf_counter() - t0
    res = CompileResult(rc == 0 and cubin is not None, cubin, log, flags, key, False, seconds,
                        cu_name, tc, rc)
    if use_cache:
        try:
            entry.mkdir(parents=True, exist_ok=True)
            if cubin is not None:
                (entry / "kernel.cubin").write_bytes(cubin)
            (entry / "result.json").write_text(json.dumps(
                {"ok": res.ok, "log": log, "flags": flags, "returncode": rc,
                 "toolchain": tc.version, "arch": arch}), encoding="utf-8")
        except OSError:
            pass  # an unwritable cache only costs speed
    return res


# --- shared libraries ------------------------------------------------------------------------
class BuildError(Exception):
    """A compiler is missing or rejected the code; `log` holds its output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


def library_key(*parts: str) -> str:
    """The SHA-256 of everything that decides a library's bytes (source, flags, versions)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _safe(text: str, limit: int = 48) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in text)[:limit]


def build_cached_library(source: str, command: Sequence[str], *, key: str, name: str,
                         variant: str, purpose: str, cache: Path | None = None,
                         env: Mapping[str, str] | None = None,
                         timeout: float = 600.0) -> tuple[Path, bool]:
    """`command -o LIB SOURCE.cu` into `<cache>/lib/<name>-<variant>-<key>.so`, once.

    Returns the library and whether it was already cached.  `purpose` ("for sm_90a", "for
    the CPU") finishes the error message.  The library is copied into the cache atomically,
    so two processes building the same key never see half a file.
    """
    tool = Path(command[0]).name
    root = (cache if cache is not None else cache_dir()) / "lib"
    safe = _safe(name)
    out = root / f"{safe}-{_safe(variant, 16)}-{key[:24]}.so"
    if out.is_file():
        return out, True
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cake-build-") as tmp:
        cu = Path(tmp) / f"{safe}.cu"
        cu.write_text(source, encoding="utf-8")
        so = Path(tmp) / f"{safe}.so"
        try:
            res = subprocess.run([*command, "-o", str(so), str(cu)], capture_output=True,
                                 text=True, timeout=timeout, check=False,
                                 env=None if env is None else dict(env))
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"{tool} took longer than {timeout:.0f} s") from exc
        except OSError as exc:
            raise BuildError(f"cannot run {command[0]}: {exc}") from exc
        log = (res.stdout + res.stderr).replace(tmp + "/", "").strip()
        if res.returncode != 0 or not so.is_file():
            raise BuildError(f"{tool} failed (exit {res.returncode}) building {name} {purpose}",
                             log)
        staged = out.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(so, staged)
        staged.replace(out)  # atomic: a concurrent build of the same key writes the same bytes
    return out, False


__all__ = ["NOT_FOUND", "BuildError", "CompileResult", "Toolchain", "build_cached_library",
           "cache_dir", "cache_key", "compile_cu", "compile_flags", "find_nvcc", "find_ptxas",
           "find_toolchain", "library_key"]
