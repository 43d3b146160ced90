"""Column slices of wgmma fragments: `x[:, a:b]` on 16-column boundaries renames registers.

A (64, 128) bf16 cast of an accumulator feeds two wgmmas as their A operand, one per
64-column half, because the B operand of each lives in its own 64-column swizzled tile
(a 128-column bf16 row is wider than the 128-byte swizzle span).  The chain is checked,
simulated against numpy, lowered (the slice is a register copy at a constant offset that
nvcc folds away), compiled without spills or serialized wgmmas and run on the CPU emulator;
bad slices are located findings.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from kernel_support import assert_builds_clean, assert_emulates

from cake_core.check import check_text
from cake_core.cost.model import profile
from cake_core.emulate.build import host_compiler_present
from cake_core.hardware import get_gpu
from cake_core.lower import lower_source
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.source import SourceFile
from cake_core.tasks import load_task

CHAIN = '''\
BM, D, N1, D2, HK = 64, 64, 128, 64, 64
M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=8)
def chain(X: Tensor[bf16, (M, D)], W1: Tensor[bf16, (N1, D)], W2: Tensor[bf16, (D2, N1)],
          Y: Tensor[bf16, (M, D2)]):
    sx = smem(bf16, (BM, D), layout=swizzle(128))
    s1 = smem(bf16, (N1, D), layout=swizzle(128))
    s2 = smem(bf16, (N1 // HK, D2, HK), layout=swizzle(128))
    ready = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        ready.expect_tx((BM * D + N1 * D + D2 * N1) * 2)
        tma_load(sx, X.tile((BM, D), (block.x, 0)), ready)
        tma_load(s1, W1.tile((N1, D), (0, 0)), ready)
        for h in range(N1 // HK):
            tma_load(s2[h], W2.tile((D2, HK), (0, h)), ready)
    with role("mma", warps=range(4, 8)):
        ready.wait(0)
        h = fragment(f32, (BM, N1), layout=wgmma_acc)
        wgmma(h, sx, s1.T)
        wgmma_wait(0)
        p = cast(h, bf16)
        y = fragment(f32, (BM, D2), layout=wgmma_acc)
        wgmma(y, p[:, 0:HK], s2[0].T)
        wgmma(y, p[:, HK:], s2[1].T)
        wgmma_wait(0)
        store(Y.tile((BM, D2), (block.x, 0)), cast(y, bf16))
'''

TASK_FILE = Path(__file__).parent / "data" / "wgmma_chain128_task.py"
TASK = load_task(str(TASK_FILE))
FIRST, SECOND = "p[:, 0:HK]", "p[:, HK:]"


def _codes(text: str) -> list[tuple[str, str]]:
    """(code, source text of the range) of every finding."""
    res = check_text(text, "chain.cake")
    data = text.encode()
    return [(d.code, data[d.span.start.offset:d.span.end.offset].decode())
            for d in res.diagnostics]


def test_the_chain_checks_clean() -> None:
    assert check_text(CHAIN, "chain.cake").diagnostics == []


def test_a_slice_has_the_columns_and_layout_of_its_operand() -> None:
    res = check_text(CHAIN, "chain.cake")
    assert res.program is not None
    ops = [op for op in res.program.kernels[0].ops() if op.prim.name == "cols"]
    assert len(ops) == 2
    for op in ops:
        t = op.results[0].type
        assert [d.const for d in t.shape] == [64, 64]          # type: ignore[attr-defined]
        assert t.dtype.value == "bf16" and t.layout.value == "wgmma_acc"  # type: ignore


def test_the_simulator_matches_numpy() -> None:
    report = run_task(TASK, SimKernel.from_text(CHAIN, "chain.cake"), n_schedules=2)
    assert report.passed, report


def test_swapped_halves_are_caught_by_the_reference() -> None:
    """Each half of P must meet its own half of W2: the slices are not interchangeable."""
    bad = CHAIN.replace(FIRST, "p[:, TMP]").replace(SECOND, FIRST).replace("p[:, TMP]",
                                                                             SECOND)
    assert bad != CHAIN and check_text(bad, "chain.cake").diagnostics == []
    report = run_task(TASK, SimKernel.from_text(bad, "chain.cake"), n_schedules=1)
    assert not report.passed


def _lowered() -> str:
    res = lower_source(SourceFile.from_bytes(CHAIN.encode(), "chain.cake"))
    assert res.ok and res.cu is not None, res.diagnostics
    return res.cu


def test_the_lowering_renames_the_second_half_at_an_offset_of_32_registers() -> None:
    """Columns 64..127 of a (64, 128) accumulator are registers 32..63 of every thread."""
    cu = _lowered()
    halves = re.findall(r"__nv_bfloat16 (\w+)\[32\]; CAKE_FOR\((\w+), 8\) CAKE_FOR\((\w+), 2\) "
                        r"CAKE_FOR\((\w+), 2\) \1\[\2 \* 4 \+ \3 \* 2 \+ \4\] = "
                        r"p\[\2 \* 4 \+ \3 \* 2 \+ \4( \+ 32)?\];", cu)
    assert [h[4] for h in halves] == ["", " + 32"], halves
    # each half is packed before its own fence and read as a K = 64 A operand
    for name in (halves[0][0], halves[1][0]):
        assert re.search(rf"cake_pack_16x2\({name}\[2 \* \w+\], {name}\[2 \* \w+ \+ 1\]\); "
                         r"cake_fence_regs\(\w+\); cake_fence_regs\(y\); cake_wgmma_fence\(\); "
                         r"CAKE_FOR\(\w+, 4\) cake_wgmma_m64n64k16_bf16_rs\(", cu)


def test_a_slice_costs_nothing() -> None:
    res = check_text(CHAIN, "chain.cake")
    assert res.program is not None
    gpu = get_gpu("h200")
    assert gpu is not None
    ops = [w for w in profile(res.program.kernels[0], {"M": 4096}, gpu).ops
           if w.op.prim.name == "cols"]
    assert len(ops) == 2
    for w in ops:
        r = w.record
        assert r.cuda_ops == 0 and r.tensor is None and r.smem_read == 0 and r.issue == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_compiles_it_without_spills_or_serialized_wgmmas(tmp_path: Path) -> None:
    path = tmp_path / "chain.cake"
    path.write_text(CHAIN)
    assert_builds_clean(path)


#: One warpgroup over 128 rows: two 64-row slabs, each sliced at its own register offset.
TWO_SLABS = CHAIN.replace("BM, D, N1, D2, HK = 64,", "BM, D, N1, D2, HK = 128,")


def test_two_slabs_slice_each_slab() -> None:
    assert TWO_SLABS != CHAIN
    res = lower_source(SourceFile.from_bytes(TWO_SLABS.encode(), "chain.cake"))
    assert res.ok and res.cu is not None, res.diagnostics
    assert re.search(r"\[(\w+) \* 32 \+ (\w+) \* 4 \+ (\w+) \* 2 \+ (\w+)\] = "
                     r"p\[\1 \* 64 \+ \2 \* 4 \+ \3 \* 2 \+ \4 \+ 32\];", res.cu)
    report = run_task(TASK, SimKernel.from_text(TWO_SLABS, "chain.cake"), n_schedules=1)
    assert report.passed, report


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize("text", [CHAIN, TWO_SLABS], ids=["one_slab", "two_slabs"])
def test_the_emulated_lowering_matches_numpy(tmp_path: Path, text: str) -> None:
    path = tmp_path / "chain.cake"
    path.write_text(text)
    assert_emulates(path, TASK, {"M": 72})


# --- bad slices: each a finding at the part of the slice that is wrong --------------------
@pytest.mark.parametrize(("slice_", "code", "at", "says"), [
    ("p[:, 0:40]", "CK111", "40", "16-column boundary"),
    ("p[:, 8:72]", "CK111", "8", "16-column boundary"),
    ("p[:, 64:192]", "CK111", "192", "within the fragment's 128 columns"),
    ("p[:, 64:64]", "CK111", "64", "non-empty"),
    ("p[0:32, 0:64]", "CK111", "0:32, 0:64", "columns only"),
    ("p[:, 0:64:2]", "CK111", "2", "no step"),
    ("p[0, 0:64]", "CK111", "0, 0:64", "columns only"),
])
def test_a_bad_slice_is_a_located_finding(slice_: str, code: str, at: str, says: str) -> None:
    text = CHAIN.replace(FIRST, slice_)
    res = check_text(text, "chain.cake")
    errors = res.errors
    assert errors, slice_
    d = errors[0]
    data = text.encode()
    assert d.code == code and says in d.message, (d.code, d.message)
    assert data[d.span.start.offset:d.span.end.offset].decode() == at


def test_a_slice_of_a_rows_fragment_is_a_type_error() -> None:
    """Columns of the generic `rows` layout are spread over lanes: no renaming exists."""
    text = CHAIN.replace("        p = cast(h, bf16)\n",
                         "        p = cast(h, bf16)\n"
                         "        q = fragment(bf16, (BM, N1))\n"
                         "        store(Y.tile((BM, D2), (block.x, 0)), q[:, 0:64])\n")
    found = [(d.code, d.message) for d in check_text(text, "chain.cake").errors]
    assert found and found[0][0] == "CK104" and "rows fragment" in found[0][1], found


def test_a_runtime_bound_is_not_constant() -> None:
    text = CHAIN.replace("        wgmma(y, p[:, 0:HK], s2[0].T)\n",
                         "        for k in range(2):\n"
                         "            wgmma(y, p[:, k * HK:(k + 1) * HK], s2[k].T)\n"
                         ).replace("        wgmma(y, p[:, HK:], s2[1].T)\n", "")
    found = [(d.code, d.message) for d in check_text(text, "chain.cake").errors]
    assert found and found[0][0] == "CK107", found


def test_a_buffer_is_still_not_sliced() -> None:
    """Shared memory keeps its tiles (`.tile`, stage indices): a slice there is CK111."""
    text = CHAIN.replace("s2[0].T", "s2[0:1].T")
    found = [(d.code, d.message) for d in check_text(text, "chain.cake").errors]
    assert found and found[0][0] == "CK111" and "slices are not supported" in found[0][1]


# --- a slice holds its base's registers while a wgmma reads it -----------------------------
REBOUND = CHAIN.replace("        wgmma(y, p[:, HK:], s2[1].T)\n        wgmma_wait(0)\n",
                        "        wgmma(y, p[:, HK:], s2[1].T)\n"
                        "        p = cast(h * 2.0, bf16)\n"
                        "        wgmma_wait(0)\n")


def test_rebinding_the_base_of_a_slice_in_flight_is_ck328() -> None:
    """The wgmma reads `p`'s registers through the slice: re-binding `p` before the wait
    overwrites them (static CK328, at the re-binding)."""
    assert REBOUND != CHAIN
    found = [(d.code, d.span.start.line + 1) for d in check_text(REBOUND, "c.cake").diagnostics]
    line = REBOUND.splitlines().index("        p = cast(h * 2.0, bf16)") + 1
    assert found == [("CK328", line)], found


def test_the_simulator_reports_the_base_rebound_in_flight() -> None:
    report = run_task(TASK, SimKernel.from_text(REBOUND, "c.cake"), n_schedules=1)
    assert "CK506" in {d.code for d in report.diagnostics}
