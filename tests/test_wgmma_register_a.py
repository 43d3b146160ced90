"""wgmma with A in registers: `cast` of an accumulator feeds the next wgmma as its A operand
(the register fragment of m64nNk16 A has the accumulator's per-thread layout), as attention
does with P = softmax(S) before O += P @ V.

The kernel chains two GEMMs: Y = bf16(bf16(X @ W1.T) @ W2.T).  It is simulated against a
numpy reference, lowered (the `_rs` helper with four packed .b32 per K step), compiled by
nvcc where present and run on the CPU emulator where a host compiler is present.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from kernel_support import assert_builds_clean, assert_emulates

from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.lower import lower_source
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.source import SourceFile
from cake_core.tasks import load_task

CHAIN = '''\
BM, D, N1, D2 = 64, 64, 64, 64
M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=8)
def chain(X: Tensor[bf16, (M, D)], W1: Tensor[bf16, (N1, D)], W2: Tensor[bf16, (D2, N1)],
          Y: Tensor[bf16, (M, D2)]):
    sx = smem(bf16, (BM, D), layout=swizzle(128))
    s1 = smem(bf16, (N1, D), layout=swizzle(128))
    s2 = smem(bf16, (D2, N1), layout=swizzle(128))
    ready = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        ready.expect_tx((BM * D + N1 * D + D2 * N1) * 2)
        tma_load(sx, X.tile((BM, D), (block.x, 0)), ready)
        tma_load(s1, W1.tile((N1, D), (0, 0)), ready)
        tma_load(s2, W2.tile((D2, N1), (0, 0)), ready)
    with role("mma", warps=range(4, 8)):
        ready.wait(0)
        h = fragment(f32, (BM, N1), layout=wgmma_acc)
        wgmma(h, sx, s1.T)
        wgmma_wait(0)
        p = cast(h, bf16)
        y = fragment(f32, (BM, D2), layout=wgmma_acc)
        wgmma(y, p, s2.T)
        wgmma_wait(0)
        store(Y.tile((BM, D2), (block.x, 0)), cast(y, bf16))
'''


#: The task (inputs, numpy reference, tolerance) lives in a file: the emulated run loads it
#: by path in its worker process.
TASK_FILE = Path(__file__).parent / "data" / "wgmma_chain_task.py"
TASK = load_task(str(TASK_FILE))


def _lowered() -> str:
    res = lower_source(SourceFile.from_bytes(CHAIN.encode(), "chain.cake"))
    assert res.ok and res.cu is not None, res.diagnostics
    return res.cu


def test_the_chain_checks_clean() -> None:
    diags = check_text(CHAIN, "chain.cake").diagnostics
    assert diags == [], diags


def test_the_simulator_matches_numpy() -> None:
    sk = SimKernel.from_text(CHAIN, "chain.cake")
    report = run_task(TASK, sk, n_schedules=2)
    assert report.passed, report


def test_an_fp8_register_operand_is_a_dtype_error() -> None:
    bad = (CHAIN.replace("p = cast(h, bf16)", "p = cast(h, e4m3)")
           .replace("s2 = smem(bf16", "s2 = smem(e4m3")
           .replace("W2: Tensor[bf16", "W2: Tensor[e4m3"))
    diags = check_text(bad, "chain.cake").diagnostics
    assert any("registers for f16/bf16 only" in d.message for d in diags), diags


def test_the_lowering_packs_accumulator_registers_as_the_a_fragment() -> None:
    cu = _lowered()
    # every pair of the cast is packed before the fence, low element in the low half ...
    assert re.search(r"uint32_t (\w+)\[16\]; CAKE_FOR\((\w+), 16\) \1\[\2\] = "
                     r"cake_pack_16x2\(p\[2 \* \2\], p\[2 \* \2 \+ 1\]\); "
                     r"cake_fence_regs\(\1\); cake_fence_regs\(y\); cake_wgmma_fence\(\);", cu)
    # ... and K step kk reads words 4 * kk .. 4 * kk + 3 (elements 8 * kk .. 8 * kk + 7)
    assert re.search(r"cake_wgmma_m64n64k16_bf16_rs\(y, (\w+)\[(\w+) \* 4\], \1\[\2 \* 4 \+ 1\], "
                     r"\1\[\2 \* 4 \+ 2\], \1\[\2 \* 4 \+ 3\], cake_wgmma_desc", cu)
    # A is a vector of four registers, and only imm-trans-b follows the scales
    assert "{%32, %33, %34, %35}, %36, \"\n      \"p, 1, 1, 0;" in cu


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_compiles_it_for_sm90a(tmp_path: Path) -> None:
    path = tmp_path / "chain.cake"
    path.write_text(CHAIN)
    assert_builds_clean(path)   # no spills, no serialized wgmma


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_lowering_matches_numpy(tmp_path: Path) -> None:
    path = tmp_path / "chain.cake"
    path.write_text(CHAIN)
    assert_emulates(path, TASK, {"M": 72})


def test_the_simulator_reports_an_operand_rebound_in_flight() -> None:
    """The register A operand is read at issue in the simulator, but the hardware reads
    the registers until the wait: re-binding the name before it is a dynamic CK506."""
    bad = CHAIN.replace("        wgmma(y, p, s2.T)\n        wgmma_wait(0)\n",
                        "        wgmma(y, p, s2.T)\n        p = cast(h * 2.0, bf16)\n"
                        "        wgmma_wait(0)\n")
    assert bad != CHAIN
    report = run_task(TASK, SimKernel.from_text(bad, "chain.cake"), n_schedules=1)
    assert "CK506" in {d.code for d in report.diagnostics}
    ok = run_task(TASK, SimKernel.from_text(CHAIN, "chain.cake"), n_schedules=1)
    assert ok.diagnostics == []
