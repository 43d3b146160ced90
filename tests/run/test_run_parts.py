"""The runner's parts: size expressions, storage conversions, floors, targets, the shared
library and its ctypes launcher (built with nvcc when it is installed; no GPU needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from run_support import GEMM, ROOT, kernel_specs

from cake_core.hardware import GPUS
from cake_core.ir.types import DType
from cake_core.lower import lower_source
from cake_core.run.build import BuildError, build_library, nvcc_target
from cake_core.run.device import LaunchError, probe_gpu
from cake_core.run.fake import FakeDevice
from cake_core.run.kernels import CudaKernel
from cake_core.run.roofline import device_gpu, gpu_for_device, workload
from cake_core.run.tensors import (
    RunSetupError,
    eval_sym_json,
    from_storage,
    poisoned_mask,
    specs_from_meta,
    to_storage,
)
from cake_core.source import SourceFile
from cake_core.tasks import load_task


def test_size_expressions() -> None:
    e = {"op": "cdiv", "args": [{"dim": "M"}, 128]}
    assert eval_sym_json(e, {"M": 200}) == 2
    assert eval_sym_json({"op": "*", "args": [{"dim": "B"}, 3]}, {"B": 4}) == 12
    assert eval_sym_json({"op": "min", "args": [5, {"dim": "K"}]}, {"K": 2}) == 2
    with pytest.raises(RunSetupError, match="no value for dim N"):
        eval_sym_json({"dim": "N"}, {})
    with pytest.raises(RunSetupError):
        eval_sym_json({"op": "//", "args": [1, 0]}, {})


@pytest.mark.parametrize("dtype", [DType.BF16, DType.F16, DType.F32, DType.I32])
def test_storage_round_trip_and_poison(dtype: DType) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32) * 4
    if dtype == DType.I32:
        x = np.abs(np.round(x)).astype(np.int32)  # -1 is the poison itself
    from cake_core.sim.dtypes import round_to

    x = round_to(x, dtype)
    raw = to_storage(x, dtype).view(np.uint8).reshape(-1)
    assert raw.size == x.size * dtype.bytes
    np.testing.assert_array_equal(from_storage(raw, dtype, x.shape), x)
    assert not poisoned_mask(raw, dtype, x.shape).any()
    raw = raw.copy()
    raw[: dtype.bytes] = 0xFF
    mask = poisoned_mask(raw, dtype, x.shape)
    assert mask[0, 0] and mask.sum() == 1
    back = from_storage(raw, dtype, x.shape)[0, 0]
    assert (np.isnan(back) if dtype.is_float else back == -1)


def test_specs_from_metadata_match_the_ir() -> None:
    lowered = lower_source(SourceFile.read(GEMM, "gemm_sm90.cake"))
    meta_specs = specs_from_meta(lowered.kernels[0].meta)
    ir_specs = kernel_specs(GEMM)
    assert [(s.name, s.dtype, s.shape) for s in meta_specs] == \
        [(s.name, s.dtype, s.shape) for s in ir_specs]
    assert [s.written for s in meta_specs] == [False, False, True]
    assert meta_specs[2].nbytes({"M": 10, "N": 8, "K": 4}) == 160


def test_gpu_names_from_the_driver() -> None:
    assert gpu_for_device("NVIDIA H200").name == "H200-SXM"
    assert gpu_for_device("NVIDIA H100 80GB HBM3").name == "H100-SXM5"
    assert gpu_for_device("NVIDIA A100-SXM4-80GB").name == "A100-SXM4-80GB"
    assert gpu_for_device("NVIDIA A10").name == "A10"
    assert gpu_for_device("NVIDIA GeForce RTX 4090") is None
    assert device_gpu("NVIDIA GeForce RTX 4090", (8, 9)).arch == "sm_89"


def test_workload_and_floor() -> None:
    task = load_task("gemm_bf16")
    from cake_core.check import check_text

    k = check_text(GEMM.read_text(encoding="utf-8"), str(GEMM)).program.kernels[0]
    dims = {"M": 4096, "N": 4096, "K": 4096}
    wl = workload(task, k, kernel_specs(GEMM), dims, GPUS["H200-SXM"])
    assert wl.flops == pytest.approx(2 * 4096**3)
    assert wl.bytes == 3 * 4096 * 4096 * 2
    assert wl.floor_ms == pytest.approx(2 * 4096**3 / 989.4e12 * 1e3)


def test_nvcc_targets() -> None:
    assert nvcc_target("sm_90a", (9, 0)) == "sm_90a"
    assert nvcc_target("sm_80", (9, 0)) == "sm_90", "sm_80 code is compiled for Hopper"
    assert nvcc_target("sm_80", (8, 6)) == "sm_86"
    assert nvcc_target("sm_80", None) == "sm_80"
    with pytest.raises(BuildError, match=r"runs only on compute capability 9\.0"):
        nvcc_target("sm_90a", (10, 0))
    with pytest.raises(BuildError, match=r"needs compute capability 9\.0"):
        nvcc_target("sm_90", (8, 0))


def test_probe_never_raises() -> None:
    p = probe_gpu()
    assert p.present or p.reason


# --- the shared library (needs nvcc, not a GPU) --------------------------------------------
HAVE_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").is_file()


@pytest.fixture(scope="module")
def sm80_library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    if not HAVE_NVCC:
        pytest.skip("nvcc is not installed")
    path = ROOT / "examples" / "gemm_sm80.cake"
    lowered = lower_source(SourceFile.read(path, "gemm_sm80.cake"))
    cache = tmp_path_factory.mktemp("cache")
    lib = build_library(lowered.cu or "", "sm_80", name="gemm_sm80", cache=cache)
    assert not lib.cached
    again = build_library(lowered.cu or "", "sm_80", name="gemm_sm80", cache=cache)
    assert again.cached and again.path == lib.path, "the second build is a cache hit"
    return lib.path, lowered.kernels[0].meta


@pytest.mark.nvcc
def test_the_library_exports_the_launcher_and_metadata(sm80_library: tuple[Path, dict]
                                                       ) -> None:
    import ctypes
    import json

    path, meta = sm80_library
    lib = ctypes.CDLL(str(path))
    raw = ctypes.cast(getattr(lib, meta["metadata_symbol"]), ctypes.c_char_p).value
    assert json.loads(raw) == meta
    k = CudaKernel(path, meta)
    assert [s.name for s in k.specs] == ["A", "B", "C"]
    assert k.dim_limits["N"]["multiple_of"] == 8
    assert "illegal memory access" in k.error_string(700)


@pytest.mark.nvcc
@pytest.mark.skipif(probe_gpu().present, reason="would launch on a real GPU with fake pointers")
def test_without_a_gpu_the_launcher_returns_an_error(sm80_library: tuple[Path, dict]) -> None:
    path, meta = sm80_library
    k = CudaKernel(path, meta)
    dev = FakeDevice()
    bufs = {s.name: dev.alloc(64) for s in k.specs}
    with pytest.raises(LaunchError, match="cake_launch_gemm_sm80 returned"):
        k.launch(dev, bufs, {"M": 128, "N": 128, "K": 64}, {}, dev.new_stream())
    with pytest.raises(LaunchError, match="device setup failed"):
        k.prepare()


@pytest.mark.nvcc
def test_a_compile_error_is_a_build_error(tmp_path: Path) -> None:
    if not HAVE_NVCC:
        pytest.skip("nvcc is not installed")
    with pytest.raises(BuildError) as exc:
        build_library("this is not C++;\n", "sm_80", name="broken", cache=tmp_path)
    assert "nvcc failed" in str(exc.value) and exc.value.log
