"""The launcher keeps the kernel's size contract: dims declared `max=` or `multiple_of=`, and
no dim negative.

A launch that breaks it must return cudaErrorInvalidValue before touching the device (a
tinygemm launched with M = 100 used to write 64 rows and report success), and
`cake_contract_error_<kernel>` must say which rule broke.  Nothing can run a kernel here,
so the check is tested three ways: in the emitted text; compiled with the host C++ compiler
alone (the check and the launcher's opening, against stub CUDA types), which proves it needs
no CUDA and lets the Python runner read the message; and, where nvcc is installed, in the
real shared library, whose launcher is called without a GPU.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cake_core.lower import LowerResult, lower_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.run.build import build_library
from cake_core.run.device import LaunchError, probe_gpu
from cake_core.run.fake import FakeDevice
from cake_core.run.kernels import CUDA_ERROR_INVALID_VALUE, CudaKernel
from cake_core.source import SourceFile

#: Tensor, scalar, tensor: the launcher takes them in this order, then the dims.
SCALE = """\
M = dim("M", multiple_of=4, max=4096)

@kernel(arch="sm_80", grid=(cdiv(M, 128),), warps=4)
def scale(A: Tensor[f32, (M,)], alpha: f32, C: Tensor[f32, (M,)]):
    x = load(A.tile((128,), (block.x,)))
    store(C.tile((128,), (block.x,)), x * alpha)
"""

#: Just enough of the CUDA runtime's declarations for the launcher's opening lines.
STUB_CUDA = """\
typedef int cudaError_t;
static const cudaError_t cudaSuccess = 0;
static const cudaError_t cudaErrorInvalidValue = 1;
typedef struct CUstream_st* cudaStream_t;
struct __nv_bfloat16 { unsigned short bits; };
"""

GXX = shutil.which("g++") or shutil.which("c++")


def _lower(text: str, name: str) -> LowerResult:
    res = lower_source(SourceFile(text, name))
    assert res.cu is not None, [d.message for d in res.diagnostics]
    return res


@pytest.fixture(scope="module")
def scale() -> LowerResult:
    return _lower(SCALE, "scale.cake")


def _contract_fn(cu: str, entry: str) -> str:
    m = re.search(r'^extern "C" const char\* cake_contract_error_' + entry +
                  r"\(.*?^\}$", cu, re.M | re.S)
    assert m is not None, "no contract check in the .cu"
    return m.group(0)


def _launcher_opening(cu: str, entry: str) -> list[str]:
    """The launcher's signature line and every line up to the first that uses the grid."""
    lines = cu.splitlines()
    start = next(i for i, ln in enumerate(lines)
                 if ln.startswith(f'extern "C" cudaError_t cake_launch_{entry}('))
    stop = next(i for i in range(start, len(lines)) if "const dim3 grid" in lines[i])
    return lines[start:stop]


# --- the emitted text ----------------------------------------------------------------------
def test_the_check_lists_every_declared_rule_in_order(
        lowered_examples: dict[str, LowerResult]) -> None:
    cu = lowered_examples["tinygemm_sm90"].cu
    assert cu is not None
    fn = _contract_fn(cu, "tinygemm_sm90")
    body = [ln.strip() for ln in fn.splitlines()[1:-1]]
    assert fn.splitlines()[0].endswith("(int M, int N, int K) {")
    assert body == [
        'if (M < 0) return "M is negative";',
        "if (M > 64) return \"M exceeds the kernel's declared max 64\";",
        'if (N < 0) return "N is negative";',
        'if (N % 8 != 0) return "N is not a multiple of 8, as the kernel declares";',
        'if (K < 0) return "K is negative";',
        'if (K % 8 != 0) return "K is not a multiple of 8, as the kernel declares";',
        "return nullptr;",
    ]


def test_the_launcher_checks_before_it_encodes_or_launches(
        lowered_examples: dict[str, LowerResult]) -> None:
    cu = lowered_examples["tinygemm_sm90"].cu
    assert cu is not None
    launcher = cu[cu.index('extern "C" cudaError_t cake_launch_tinygemm_sm90('):]
    check = "  if (cake_contract_error_tinygemm_sm90(M, N, K) != nullptr) " \
            "return cudaErrorInvalidValue;"
    assert launcher.splitlines()[1].startswith(check)
    at = launcher.index(check)
    assert at < launcher.index("const dim3 grid") < launcher.index("cake_encode_tiled(") \
        < launcher.index("<<<")
    assert cu.index(_contract_fn(cu, "tinygemm_sm90")) < cu.index(launcher)


def test_metadata_names_the_check_and_the_argument_order(scale: LowerResult) -> None:
    meta = scale.kernels[0].meta
    assert meta["contract_check"] == "cake_contract_error_scale"
    assert meta["launcher_params"] == ["A", "alpha", "C", "M", "stream"]
    assert scale.cu is not None
    assert 'extern "C" cudaError_t cake_launch_scale(const float* A, float alpha, float* C, ' \
           "int M, cudaStream_t stream) {" in scale.cu


def test_a_kernel_without_dims_has_a_check_that_always_passes() -> None:
    res = _lower('@kernel(arch="sm_80", grid=(1,), warps=4)\n'
                 "def k(A: Tensor[f32, (128,)]):\n"
                 "    x = load(A.tile((128,), (0,)))\n"
                 "    store(A.tile((128,), (0,)), x)\n", "nodims.cake")
    assert res.cu is not None
    fn = _contract_fn(res.cu, "k")
    assert fn.splitlines()[0].endswith("cake_contract_error_k(void) {")
    assert "if (cake_contract_error_k() != nullptr) return cudaErrorInvalidValue;" in res.cu


# --- compiled by the host compiler alone ---------------------------------------------------
@pytest.fixture(scope="module")
def stub_library(scale: LowerResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The emitted check and the launcher's opening, built with the host C++ compiler only.

    The launcher is cut after its contract check and ends `return cudaSuccess`: if the check
    is gone, a broken shape comes back as success."""
    if GXX is None:
        pytest.skip("no host C++ compiler")
    assert scale.cu is not None
    opening = _launcher_opening(scale.cu, "scale")
    src = (STUB_CUDA + _contract_fn(scale.cu, "scale") + "\n" +
           "\n".join(ln for ln in opening if not ln.startswith("#line")) +
           "\n  return cudaSuccess;  // a real launcher would launch here\n}\n")
    out = tmp_path_factory.mktemp("contract")
    (out / "contract.cpp").write_text(src, encoding="utf-8")
    lib = out / "libcontract.so"
    res = subprocess.run([GXX, "-std=c++17", "-Wall", "-Werror", "-shared", "-fPIC", "-o",
                          str(lib), str(out / "contract.cpp")],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr + "\n" + src
    return lib


def test_the_check_is_plain_host_code(stub_library: Path) -> None:
    lib = ctypes.CDLL(str(stub_library))
    check = lib.cake_contract_error_scale
    check.argtypes, check.restype = [ctypes.c_int], ctypes.c_char_p
    assert check(4096) is None and check(0) is None and check(128) is None
    assert check(-4) == b"M is negative"
    assert check(4097) == b"M is not a multiple of 4, as the kernel declares"
    assert check(8192) == b"M exceeds the kernel's declared max 4096"


def test_the_launcher_refuses_a_broken_shape(stub_library: Path) -> None:
    lib = ctypes.CDLL(str(stub_library))
    launch = lib.cake_launch_scale
    launch.argtypes = [ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                       ctypes.c_void_p]
    launch.restype = ctypes.c_int
    assert launch(None, 1.0, None, 8192, None) == CUDA_ERROR_INVALID_VALUE
    assert launch(None, 1.0, None, -4, None) == CUDA_ERROR_INVALID_VALUE
    assert launch(None, 1.0, None, 4096, None) == 0


def test_the_runner_says_which_rule_broke(stub_library: Path, scale: LowerResult) -> None:
    k = CudaKernel(stub_library, scale.kernels[0].meta)
    dev = FakeDevice()
    bufs = {s.name: dev.alloc(64) for s in k.specs}
    stream = dev.new_stream()
    with pytest.raises(LaunchError) as exc:
        k.launch(dev, bufs, {"M": 8192}, {"alpha": 2.0}, stream)
    msg = str(exc.value)
    assert msg.startswith("cake_launch_scale returned ")
    assert "M exceeds the kernel's declared max 4096 (M=8192); nothing was launched" in msg
    assert k.contract_error({"M": 4098}) == "M is not a multiple of 4, as the kernel declares"
    assert k.contract_error({"M": 4096}) is None
    k.launch(dev, bufs, {"M": 4096}, {"alpha": 2.0}, stream)  # the stub returns success


# --- the real shared library (nvcc, no GPU) --------------------------------------------------
@pytest.fixture(scope="module")
def tinygemm_library(lowered_examples: dict[str, LowerResult],
                     tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    low = lowered_examples["tinygemm_sm90"]
    lib = build_library(low.cu or "", "sm_90a", name="tinygemm_sm90",
                        cache=tmp_path_factory.mktemp("cache"))
    return lib.path, low.kernels[0].meta


@pytest.mark.nvcc
def test_the_built_launcher_refuses_m_above_its_max(
        tinygemm_library: tuple[Path, dict[str, Any]]) -> None:
    path, meta = tinygemm_library
    lib = ctypes.CDLL(str(path))
    launch = getattr(lib, meta["launcher"])
    launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    launch.restype = ctypes.c_int
    # returned before any CUDA call: the same code with or without a GPU
    assert launch(None, None, None, 100, 4096, 512, None) == CUDA_ERROR_INVALID_VALUE
    k = CudaKernel(path, meta)
    dev = FakeDevice()
    bufs = {s.name: dev.alloc(64) for s in k.specs}
    with pytest.raises(LaunchError, match=r"cake_launch_tinygemm_sm90 returned .*\(1\): M "
                       r"exceeds the kernel's declared max 64 \(M=100, N=4096, K=512\)"):
        k.launch(dev, bufs, {"M": 100, "N": 4096, "K": 512}, {}, dev.new_stream())


@pytest.mark.nvcc
@pytest.mark.skipif(probe_gpu().present, reason="would launch on a real GPU with fake pointers")
def test_a_shape_that_keeps_the_contract_reaches_the_device(
        tinygemm_library: tuple[Path, dict[str, Any]]) -> None:
    path, meta = tinygemm_library
    k = CudaKernel(path, meta)
    dev = FakeDevice()
    bufs = {s.name: dev.alloc(64) for s in k.specs}
    with pytest.raises(LaunchError) as exc:  # no GPU: the runtime's error, not the contract's
        k.launch(dev, bufs, {"M": 64, "N": 4096, "K": 512}, {}, dev.new_stream())
    assert "declared" not in str(exc.value) and "(1)" not in str(exc.value)
