"""The CPU runtime's layout facts against CuTe, an independent implementation of them.

The runtime (cake_core/emulate/include) and the lowering state the tensor-core layouts from
one reading of the PTX ISA, so a misreading shared by both would pass every emulated kernel
and only show on a GPU.  CuTe (CUTLASS's layout library, from the nvidia-cutlass wheel) states
the same facts for the kernels CUTLASS runs on hardware: its swizzle functors, canonical
K-major GMMA layouts and descriptors, the wgmma accumulator layout, the SM80 mma.sync and
ldmatrix fragment layouts.  A small host program (layouts_cake.cpp with the runtime,
layouts_cute.cpp with CuTe, linked together) compares them element by element; the
descriptors compared are the ones the lowering writes for small wgmma kernels lowered here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cake_core.lower import lower_source
from cake_core.lower.prelude import wgmma as wgmma_prelude
from cake_core.lower.toolchain import find_nvcc
from cake_core.source import SourceFile

pytestmark = pytest.mark.slow  # two host compiles, one of them CuTe's templates (~10 s)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RUNTIME_INCLUDE = ROOT / "cake_core" / "emulate" / "include"
CUDA_DEFAULT = Path("/usr/local/cuda")  # after $CUDA_HOME, $CUDA_PATH and nvcc's toolkit

CUTE_HEADERS = ("cute/tensor.hpp", "cute/atom/mma_traits_sm90_gmma.hpp",
                "cute/atom/mma_traits_sm80.hpp", "cute/atom/copy_traits_sm75.hpp",
                "cute/atom/copy_traits_sm90_tma_swizzle.hpp")

#: A K-major wgmma kernel whose operands are one swizzle span wide: what the lowering accepts.
KERNEL = """\
M = dim("M")
N = dim("N", multiple_of=16)
K = dim("K", multiple_of=16)

@kernel(arch="sm_90a", grid=(cdiv(M, 64), cdiv(N, 64)), warps=4)
def k(A: Tensor[{dt}, (M, K)], B: Tensor[{dt}, (N, K)], C: Tensor[f32, (M, N)]):
    sa = smem({dt}, (64, {bk}), layout=swizzle({span}))
    sb = smem({dt}, (64, {bk}), layout=swizzle({span}))
    bar = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    acc = fragment(f32, (64, 64), layout=wgmma_acc)
    if thread.id == 0:
        bar.expect_tx({nbytes})
        tma_load(sa, A.tile((64, {bk}), (block.x, 0)), bar)
        tma_load(sb, B.tile((64, {bk}), (block.y, 0)), bar)
    bar.wait(0)
    wgmma(acc, sa, sb.T)
    wgmma_wait(0)
    store(C.tile((64, 64), (block.x, block.y)), acc)
"""

#: dtype -> element bits
DTYPES = {"bf16": 16, "e4m3": 8}
SPANS = (128, 64, 32)

DESC_CALL = re.compile(r"cake_wgmma_desc\(smem_u32 \+ SMEM_S[AB]_OFFSET(?: \+ kk \* (\d+))?, "
                       r"(\d+), (\d+), (\d+)\)")


@dataclass(frozen=True)
class Lowered:
    """The fields of the descriptors the lowering writes for one (dtype, span)."""

    lbo: int
    sbo: int
    mode: int
    kstep: int  # bytes the start address advances per K step; 0: one step

    def args(self) -> list[str]:
        return [str(self.lbo), str(self.sbo), str(self.mode), str(self.kstep)]


def lower_wgmma(dtype: str, span: int) -> tuple[str, Lowered]:
    """Lower KERNEL and read back its descriptor arguments (both operands must agree)."""
    src = KERNEL.format(dt=dtype, span=span, bk=span * 8 // DTYPES[dtype], nbytes=128 * span)
    res = lower_source(SourceFile(src, f"wgmma_{dtype}_{span}.cake"))
    assert res.cu is not None, [d.message for d in res.diagnostics]
    calls = {Lowered(int(lbo), int(sbo), int(mode), int(kstep or 0))
             for kstep, lbo, sbo, mode in DESC_CALL.findall(res.cu)}
    assert len(calls) == 1, f"expected one descriptor shape for A and B, got {calls}"
    return res.cu, calls.pop()


# ---- the toolchain --------------------------------------------------------------------------

def cute_include() -> Path | None:
    """CuTe's headers from the nvidia-cutlass wheel (found without importing the package)."""
    spec = importlib.util.find_spec("cutlass_library")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        inc = Path(loc) / "source" / "include"
        if (inc / "cute" / "tensor.hpp").is_file():
            return inc
    return None


def cuda_includes() -> list[Path] | str:
    """The CUDA include folders CuTe needs (runtime API, driver, CCCL's cuda/std), or why not."""
    roots = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = find_nvcc()
    if nvcc is not None:
        roots.append(nvcc.parent.parent)
    roots.append(CUDA_DEFAULT)
    why = "CuTe needs the CUDA headers (cuda_runtime_api.h, cuda.h): none found under " + \
          ", ".join(str(r) for r in roots)
    for root in roots:
        inc = root / "include"
        if not ((inc / "cuda_runtime_api.h").is_file() and (inc / "cuda.h").is_file()):
            continue
        for extra in ([], [inc / "cccl"]):
            if any((d / "cuda" / "std" / "utility").is_file() for d in [inc, *extra]):
                return [inc, *extra]
        why = f"CuTe needs CCCL's cuda/std headers, absent from {inc} and {inc / 'cccl'}"
    return why


def compile_cmd(cxx: str, source: Path, out: Path, includes: list[Path], *flags: str) -> list[str]:
    return [cxx, *flags, "-O1", *(f"-I{d}" for d in includes), "-c", str(source), "-o", str(out)]


def first_error(stderr: str) -> str:
    return next((ln for ln in stderr.splitlines() if "error" in ln), stderr.strip()[:300])


@dataclass(frozen=True)
class Result:
    returncode: int
    checked: int
    mismatches: int
    report: str


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Result]:
    """Build the comparison program once; calling the fixture runs one of its checks."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("needs g++ to build the layout comparison on the host")
    cute = cute_include()
    if cute is None:
        pytest.skip("needs CuTe's headers: the nvidia-cutlass wheel (in the dev extra) is not "
                    "installed")
    cuda = cuda_includes()
    if isinstance(cuda, str):
        pytest.skip(cuda)
    build = tmp_path_factory.mktemp("layouts")
    # the runtime side compiles the lowering's own wgmma prelude, as lowered files carry it
    cu, _ = lower_wgmma("bf16", 128)
    assert wgmma_prelude.TEXT in cu
    (build / "lowering_wgmma.h").write_text(wgmma_prelude.TEXT, encoding="utf-8")
    cake_cmd = compile_cmd(cxx, HERE / "layouts_cake.cpp", build / "cake.o",
                           [RUNTIME_INCLUDE, build, HERE], "-std=c++20", "-DCAKE_EMULATE")
    cute_cmd = compile_cmd(cxx, HERE / "layouts_cute.cpp", build / "cute.o", [cute, *cuda, HERE],
                           "-std=c++17", "-w")
    jobs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for c in (cake_cmd, cute_cmd)]
    (_, cake_err), (_, cute_err) = (j.communicate() for j in jobs)
    assert jobs[0].returncode == 0, f"the runtime side does not compile:\n{cake_err}"
    if jobs[1].returncode != 0:
        # CuTe's own headers failing on this host is a skip; the comparison code failing is not
        headers = build / "cute_headers.cpp"
        headers.write_text("".join(f"#include <{h}>\n" for h in CUTE_HEADERS), encoding="utf-8")
        alone = subprocess.run(compile_cmd(cxx, headers, build / "headers.o", [cute, *cuda],
                                           "-std=c++17", "-w"),
                               capture_output=True, text=True, check=False)
        if alone.returncode != 0:
            pytest.skip(f"CuTe's headers do not compile with g++ here: {first_error(alone.stderr)}")
        pytest.fail(f"layouts_cute.cpp does not compile:\n{cute_err}")
    exe = build / "layouts"
    subprocess.run([cxx, str(build / "cake.o"), str(build / "cute.o"), "-o", str(exe)],
                   check=True, capture_output=True)

    def run(*args: str) -> Result:
        out = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120,
                             check=False)
        # CuTe prints a notice for the shared-window conversion it cannot do on the host
        lines = [ln for ln in out.stdout.splitlines()
                 if ln.startswith(("checked ", "mismatch "))]
        counts = [ln.split() for ln in lines if ln.startswith("checked ")]
        assert len(counts) == 1, f"{args}: no result\n{out.stdout}\n{out.stderr}"
        return Result(out.returncode, int(counts[0][2]), int(counts[0][3]),
                      "\n".join(lines) + out.stderr)

    return run


def agree(result: Result) -> None:
    assert result.checked > 0
    assert result.mismatches == 0 and result.returncode == 0, result.report


# ---- the comparisons ------------------------------------------------------------------------

def test_swizzle_addr_is_cutes_swizzle_functor(probe: Callable[..., Result]) -> None:
    """swizzle_addr(a, 128/64/32/0) against Swizzle<3|2|1|0, 4, 3> on every 18-bit address."""
    agree(probe("swizzle"))


@pytest.mark.parametrize("span", SPANS)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_wgmma_operands_follow_cutes_canonical_k_major_layout(
        probe: Callable[..., Result], dtype: str, span: int) -> None:
    """Element (row, k) of a 256-row operand read through the lowering's descriptor (and
    through CuTe's own, decoded by decode_desc) lands where Layout_K_SW<span>_Atom puts it,
    for every K step of the span."""
    _, low = lower_wgmma(dtype, span)
    agree(probe("gmma", str(DTYPES[dtype]), str(span), *low.args()))


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_interleaved_operands_follow_cutes_layout(probe: Callable[..., Result],
                                                  dtype: str) -> None:
    """The no-swizzle mode (not lowered yet, emulated): CuTe's descriptor for
    Layout_K_INTER_Atom tiled M-first and K-first, decoded by decode_desc."""
    agree(probe("gmma", str(DTYPES[dtype]), "0"))


@pytest.mark.parametrize("span", (*SPANS, 0))
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_tma_box_lands_in_cutes_canonical_layout(probe: Callable[..., Result], dtype: str,
                                                 span: int) -> None:
    """encode_tiled accepts the driver's enumerators for the swizzle CuTe derives from the
    layout, and box_smem places a 256-row box where that layout puts each element."""
    agree(probe("tma", str(DTYPES[dtype]), str(span)))


def test_wgmma_accumulators_follow_cutes_clayout(probe: Callable[..., Result]) -> None:
    """(thread, register) -> (row, col) against CLayout_64xN for every N from 8 to 256."""
    agree(probe("wgmma-acc"))


def test_mma_sync_fragments_follow_cutes_sm80_traits(probe: Callable[..., Result]) -> None:
    """m16n8k16 A, B and C fragments against SM80_16x8x16_F32{BF16,F16}..._TN."""
    agree(probe("mma"))


def test_ldmatrix_follows_cutes_ldsm_traits(probe: Callable[..., Result]) -> None:
    """x4, x2 and their .trans against SM75_U32x{4,2}_LDSM_N and SM75_U16x{8,4}_LDSM_T."""
    agree(probe("ldmatrix"))
