"""`col_index` and `row_index`: masks written on the logical tile, lowered to each thread's
own coordinates.

Each is checked where it matters, in the simulator and in the lowered CUDA run under
emulation, on the generic row layout (a ragged last column chunk) and on the wgmma
accumulator layout (a causal mask between two wgmmas, as attention needs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_support import assert_emulates
from test_wgmma_register_a import CHAIN

from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

DATA = Path(__file__).parent / "data"

ROWMAX = '''\
BM, NC = 4, 128
M = dim("M")
N = dim("N")

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=4)
def rowmax_masked(X: Tensor[f32, (M, N)], Y: Tensor[f32, (M,)]):
    m = fragment(f32, (BM,), fill=-inf)
    for j in range(cdiv(N, NC)):
        x = load(X.tile((BM, NC), (block.x, j)))
        x = where(lt(col_index(x) + j * NC, N), x, -inf)
        m = maximum(m, row_max(x))
    store(Y.tile((BM,), (block.x,)), m)
'''
MASK_LINE = "        x = where(lt(col_index(x) + j * NC, N), x, -inf)\n"

CAUSAL = "        h = where(le(col_index(h), row_index(h) + block.x * BM), h, 0.0)\n"
MASKED_CHAIN = CHAIN.replace("        wgmma_wait(0)\n        p = cast(h, bf16)\n",
                             "        wgmma_wait(0)\n" + CAUSAL + "        p = cast(h, bf16)\n")


def _sim(text: str, task_file: str) -> bool:
    res = check_text(text, "k.cake")
    assert res.errors == [], [d.message for d in res.errors]
    task = load_task(str(DATA / task_file))
    return run_task(task, SimKernel.from_text(text, "k.cake"), n_schedules=2).passed


def test_the_masked_chain_is_the_chain_with_one_line_more() -> None:
    assert MASKED_CHAIN.count(CAUSAL) == 1 and MASK_LINE in ROWMAX


def test_a_ragged_column_chunk_is_masked_in_the_simulator() -> None:
    assert _sim(ROWMAX, "rowmax_masked_task.py")
    # without the mask the zero-filled columns past N (0 > every value) win the maximum
    assert not _sim(ROWMAX.replace(MASK_LINE, ""), "rowmax_masked_task.py")


def test_a_causal_mask_on_a_wgmma_accumulator_in_the_simulator() -> None:
    assert _sim(MASKED_CHAIN, "masked_chain_task.py")
    assert not _sim(CHAIN, "masked_chain_task.py")  # the unmasked chain is another function


@pytest.mark.parametrize("snippet", ["col_index(m)", "row_index(1.0)"])
def test_index_of_anything_but_a_2d_fragment_is_a_finding(snippet: str) -> None:
    text = ROWMAX.replace("    store(", f"    q = {snippet}\n    store(")
    codes = [d.code for d in check_text(text, "k.cake").diagnostics]
    assert codes and set(codes) <= {"CK101", "CK102", "CK103", "CK104", "CK105", "CK106"}, codes


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize(("text", "task_file", "dims"), [
    (ROWMAX, "rowmax_masked_task.py", {"M": 6, "N": 129}),
    (MASKED_CHAIN, "masked_chain_task.py", {"M": 72}),
], ids=["rows-layout", "wgmma-accumulator"])
def test_the_lowered_coordinates_match_under_emulation(
        tmp_path: Path, text: str, task_file: str, dims: dict[str, int]) -> None:
    path = tmp_path / "k.cake"
    path.write_text(text)
    assert_emulates(path, load_task(str(DATA / task_file)), dims)
