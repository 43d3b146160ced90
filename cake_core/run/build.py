"""Build a lowered kernel and its launcher into a shared library the runner can call.

`nvcc -shared -Xcompiler -fPIC` on the lowered .cu plus a small runtime shim (error strings,
turning off the persisting-L2 carve-out), for the GPU that will run it.  nvcc is found as
`cake compile` finds it (`cake_core.lower.toolchain`).  Libraries are cached by the
SHA-256 of the source, the flags and the nvcc version under the toolchain's cache
directory (`lib/`), so re-running a benchmark, or a candidate an agent already built,
costs a hash and a file lookup.

Targets: an `sm_90a` / `sm_100a` kernel needs exactly that GPU (the `a` features do not carry
to other generations); a kernel written for an older architecture (`sm_80` mma.sync,
cp.async) is compiled for the GPU it runs on, because SASS does not carry across major
generations and JIT-compiling PTX at load time would hide compile problems until launch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cake_core.hardware import get_arch
from cake_core.lower.toolchain import (
    NOT_FOUND,
    BuildError,
    Toolchain,
    build_cached_library,
    find_toolchain,
    library_key,
)

__all__ = ["NVCC_FLAGS", "RUNTIME_SHIM", "BuildError", "Library", "build_library", "cannot_run",
           "gencode", "nvcc_target"]

RUNTIME_SHIM = r"""
// ---- appended by cake_core/run/build.py: runtime helpers the Python runner calls ----------
extern "C" const char* cake_runtime_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}
// No persisting-L2 carve-out: nothing may stay resident in L2 across the runner's flush.
extern "C" int cake_runtime_setup(void) {
  cudaError_t err = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  if (err == cudaErrorUnsupportedLimit || err == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    return 0;
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  return static_cast<int>(cudaCtxResetPersistingL2Cache());
}
"""

NVCC_FLAGS = ("-shared", "-Xcompiler", "-fPIC", "-O3", "-std=c++17", "-lineinfo")


@dataclass(frozen=True)
class Library:
    path: Path
    target: str
    cached: bool


def nvcc_target(kernel_arch: str, device_cc: tuple[int, int] | None) -> str:
    """The `sm_XY[a]` to compile for: the kernel's own, or the device's for older code.

    Raises BuildError when the device cannot run the kernel at all.
    """
    spec = get_arch(kernel_arch)
    if spec is None:
        raise BuildError(f"unknown kernel architecture {kernel_arch!r}")
    if device_cc is None:
        return spec.name
    why = cannot_run(kernel_arch, device_cc)
    if why is not None:
        raise BuildError(why)
    return spec.name if spec.name.endswith("a") else f"sm_{device_cc[0]}{device_cc[1]}"


def cannot_run(kernel_arch: str, device_cc: tuple[int, int]) -> str | None:
    """Why a GPU of compute capability `device_cc` cannot run a `kernel_arch` kernel, or
    None when it can.  A machine without that GPU is not a failure of the kernel: callers
    report this as a skip."""
    spec = get_arch(kernel_arch)
    if spec is None:
        return f"unknown kernel architecture {kernel_arch!r}"
    need = spec.compute_capability
    if spec.name.endswith("a") and device_cc != need:
        return (f"a {spec.name} kernel runs only on compute capability {need[0]}.{need[1]}; "
                f"this GPU is {device_cc[0]}.{device_cc[1]}")
    if device_cc < need:
        return (f"a {spec.name} kernel needs compute capability {need[0]}.{need[1]} or newer; "
                f"this GPU is {device_cc[0]}.{device_cc[1]}")
    return None


def gencode(target: str) -> list[str]:
    compute = "compute_" + target[3:]
    return ["-gencode", f"arch={compute},code={target}"]


def build_library(cu_text: str, target: str, *, name: str = "kernel",
                  toolchain: Toolchain | None = None, cache: Path | None = None,
                  timeout: float = 600.0) -> Library:
    """Compile `cu_text` (+ the runtime shim) for `target` into a cached shared library."""
    tc = toolchain or find_toolchain()
    if tc is None:
        raise BuildError(NOT_FOUND)
    source = cu_text + RUNTIME_SHIM
    flags = [*NVCC_FLAGS, *gencode(target)]
    env = dict(os.environ)
    env["PATH"] = f"{tc.bin_dir}{os.pathsep}{env.get('PATH', '')}"
    path, cached = build_cached_library(
        source, [str(tc.nvcc), *flags], key=library_key(source, *flags, tc.version,
                                                       "cake-run-lib/1"),
        name=name, variant=target, purpose=f"for {target}", cache=cache, env=env,
        timeout=timeout)
    return Library(path, target, cached)
