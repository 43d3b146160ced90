"""`load_scalar`: an integer read from global memory becomes a runtime int, uniform
across the block, usable as a tile coordinate, a loop bound and a `where` mask term.

Each facet is checked where it matters: the type rule (located findings), the simulator
against a routing table with an empty and ragged segments (and a kernel that ignores the
counts fails), the lowering (a read-only load), the cost model, the cross-block race
rule (CK329), and the lowered CUDA under emulation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_support import assert_emulates

from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.ir.kernel import Kernel
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

DATA = Path(__file__).parent / "data"

SEGMENTS = '''\
BM, BN = 16, 16
G = dim("G")
MT = dim("MT")
N = dim("N", multiple_of=16)

@kernel(arch="sm_90a", grid=(cdiv(N, BN), G), warps=4)
def segment_mask(X: Tensor[f32, (MT, N)], Offsets: Tensor[i32, (G + 1,)],
                 Counts: Tensor[i32, (G,)], Y: Tensor[f32, (MT, N)]):
    first = load_scalar(Offsets, (block.y,)) // BM
    rows = load_scalar(Counts, (block.y,))
    for t in range(cdiv(rows, BM)):
        x = load(X.tile((BM, BN), (first + t, block.x)))
        x = where(lt(row_index(x) + t * BM, rows), x, 0.0)
        store(Y.tile((BM, BN), (first + t, block.x)), x)
'''
MASK_LINE = "        x = where(lt(row_index(x) + t * BM, rows), x, 0.0)\n"
COUNT_CALL = "load_scalar(Counts, (block.y,))"


def _sim(text: str) -> bool:
    res = check_text(text, "k.cake")
    assert res.errors == [], [d.message for d in res.errors]
    task = load_task(str(DATA / "segment_mask_task.py"))
    return run_task(task, SimKernel.from_text(text, "k.cake"), n_schedules=2).passed


def _codes(text: str) -> list[str]:
    return [d.code for d in check_text(text, "k.cake").diagnostics]


def test_the_segments_read_from_memory_are_simulated() -> None:
    assert _sim(SEGMENTS)


def test_a_kernel_that_ignores_the_counts_fails() -> None:
    assert MASK_LINE in SEGMENTS
    assert not _sim(SEGMENTS.replace(MASK_LINE, ""))  # the padding rows are copied through
    # every segment taken at its full capacity (16 rows a tile, 2 tiles): wrong too
    assert not _sim(SEGMENTS.replace("range(cdiv(rows, BM))", "range(2)"))


@pytest.mark.parametrize(("line", "code", "where"), [
    ("n = load_scalar(X, (block.y, 0))", "CK106", "X"),             # a float tensor
    ("n = load_scalar(Counts, (block.y, 0))", "CK111", "(block.y, 0)"),  # rank 1, 2 indices
    ("n = load_scalar(Counts, ())", "CK111", "()"),
    ("n = load_scalar(Counts, (1.5,))", "CK104", "(1.5,)"),
    ("n = load_scalar(Counts, (block.y,), expect=block.x)", "CK107", "block.x"),
], ids=["float-tensor", "too-many-indices", "no-index", "float-index", "runtime-expect"])
def test_type_errors_are_located(line: str, code: str, where: str) -> None:
    text = SEGMENTS.replace("    for t in", f"    {line}\n    for t in")
    diags = check_text(text, "k.cake").diagnostics
    assert [d.code for d in diags] == [code], [(d.code, d.message) for d in diags]
    at = text.index(line) + line.index(where, len("n = load_scalar("))
    assert diags[0].span.start.offset == at


def test_the_lowering_reads_the_int_through_the_read_only_path() -> None:
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile

    cuda = lower_source(SourceFile(SEGMENTS, "k.cake")).cu
    assert cuda is not None
    assert "__ldg(Counts + int64_t(int(blockIdx.y)))" in cuda
    assert "__ldg(Offsets + int64_t(int(blockIdx.y)))" in cuda
    assert "t < cake_cdiv(rows" in cuda  # the trip count is the value read


def test_the_cost_model_prices_a_read_bound_at_its_expected_value() -> None:
    from cake_core.cost.model import predict
    from cake_core.cost.work import CostError

    def kernel(text: str) -> Kernel:
        res = check_text(text, "k.cake")
        assert res.program is not None
        return res.program.kernels[0]

    dims = {"G": 8, "MT": 512, "N": 256}
    with pytest.raises(CostError, match=r"read from memory at run time.*expect="):
        predict(kernel(SEGMENTS), dims)
    read = [predict(kernel(SEGMENTS.replace(COUNT_CALL, COUNT_CALL[:-1] + f", expect={e})")),
                    dims).work for e in (16, 64)]
    # four times the tiles a block loops over: four times the tiles read and written
    x_bytes = [w["l2_bytes"] for w in read]
    assert x_bytes[1] == pytest.approx(4 * x_bytes[0], rel=0.05)


RACY = SEGMENTS + "    store(Counts.tile((1,), (block.y,)), fragment(i32, (1,)))\n"


def test_reading_an_int_from_a_tensor_the_kernel_writes_is_ck329() -> None:
    diags = check_text(RACY, "k.cake").diagnostics
    assert [d.code for d in diags] == ["CK329"]
    assert diags[0].span.start.offset == RACY.index(COUNT_CALL)
    assert diags[0].related[0].span.start.line == RACY.count("\n", 0, RACY.index(
        "    store(Counts"))
    assert _codes(SEGMENTS) == []


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_lowered_loads_match_under_emulation(tmp_path: Path) -> None:
    path = tmp_path / "k.cake"
    path.write_text(SEGMENTS)
    assert_emulates(path, load_task(str(DATA / "segment_mask_task.py")),
                    {"G": 4, "MT": 128, "N": 48})


def test_an_if_on_the_value_read_skips_the_segment() -> None:
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile

    body = SEGMENTS[SEGMENTS.index("    for t in"):]
    guarded = SEGMENTS.replace(body, "    if rows > 0:\n" + "".join(
        "    " + line for line in body.splitlines(keepends=True)))
    assert _sim(guarded)
    cuda = lower_source(SourceFile(guarded, "k.cake")).cu
    assert cuda is not None and "if (rows" in cuda
