"""Language rules added for the batched examples: leading-1 tiles, ldmatrix operand layouts,
and no early `return`.

Copies compare shapes after dropping leading extents of 1 (a TMA box of a batched tensor
fills a buffer of lower rank); nothing else about shapes is relaxed.
"""

from __future__ import annotations

import pytest

from cake_core.check import check_text
from cake_core.ir.kernel import Op
from cake_core.ir.symbolic import Const
from cake_core.ir.types import FragLayout
from cake_core.ops.copy import copy_shapes_match, squeeze_leading

HEAD = '''BM, D = 64, 64
B, N = dim("B"), dim("N")

@kernel(arch="sm_90a", grid=(cdiv(N, BM), B), warps=4)
def k(X: Tensor[bf16, (B, N, D)], out: Tensor[i32, (B, N)]):
'''


def _codes(body: str, head: str = HEAD) -> list[str]:
    text = head + "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return [d.code for d in check_text(text, "t.cake").diagnostics]


def _shape(*dims: int) -> tuple[Const, ...]:
    return tuple(Const(d) for d in dims)


def test_squeeze_leading_keeps_one_extent() -> None:
    assert squeeze_leading(_shape(1, 64, 64)) == _shape(64, 64)
    assert squeeze_leading(_shape(1, 1)) == _shape(1)
    assert squeeze_leading(_shape(64, 1)) == _shape(64, 1)


@pytest.mark.parametrize(("a", "b", "ok"), [
    ((1, 64, 64), (64, 64), True),
    ((1, 1, 64), (64,), True),
    ((64, 64), (64, 64), True),
    ((64, 1), (64,), False),     # only leading ones drop
    ((2, 64, 64), (64, 64), False),
    ((1, 64, 32), (64, 64), False),
])
def test_copy_shapes_match(a: tuple[int, ...], b: tuple[int, ...], ok: bool) -> None:
    assert copy_shapes_match(_shape(*a), _shape(*b)) is ok
    assert copy_shapes_match(_shape(*b), _shape(*a)) is ok


def test_rank3_tile_fills_a_2d_buffer_and_a_vector_stores_to_a_unit_row() -> None:
    assert _codes('''
sx = smem(bf16, (BM, D), layout=swizzle(128))
bar = mbarrier(count=1)
fence_barrier_init()
syncthreads()
bar.expect_tx(BM * D * 2)
tma_load(sx, X.tile((1, BM, D), (block.y, block.x, 0)), bar)
bar.wait(0)
idx = fragment(i32, (BM,))
store(out.tile((1, BM), (block.y, block.x)), idx)
''') == []


def test_a_real_extent_is_not_dropped() -> None:
    assert _codes('''
sx = smem(bf16, (BM, D), layout=swizzle(128))
bar = mbarrier(count=1)
tma_load(sx, X.tile((2, BM // 2, D), (block.y, block.x, 0)), bar)
''') == ["CK105"]


def test_a_trailing_unit_extent_does_not_match_a_vector() -> None:
    assert _codes('''
idx = fragment(i32, (BM,))
store(out.tile((1, BM), (block.y, block.x)), unsqueeze(idx, 1))
''') == ["CK105"]


def test_ldmatrix_of_a_transposed_view_is_a_b_operand() -> None:
    text = '''M, N = dim("M"), dim("N")

@kernel(arch="sm_80", grid=(cdiv(M, 16),), warps=1)
def k(A: Tensor[f16, (M, 16)], B: Tensor[f16, (N, 16)], C: Tensor[f32, (M, 8)]):
    sa = smem(f16, (16, 16), layout=swizzle(32))
    sb = smem(f16, (8, 16), layout=swizzle(32))
    cp_async(sa, A.tile((16, 16), (block.x, 0)))
    cp_async(sb, B.tile((8, 16), (0, 0)))
    cp_async_commit()
    cp_async_wait(0)
    syncthreads()
    acc = fragment(f32, (16, 8), layout=mma_acc)
    mma_sync(acc, ldmatrix(sa), ldmatrix(sb.T))
    store(C.tile((16, 8), (block.x, 0)), acc)
'''
    result = check_text(text, "t.cake")
    assert result.diagnostics == []
    kernel = result.program.kernels[0]  # type: ignore[union-attr]
    layouts = [op.results[0].type.layout for op in kernel.ops() if isinstance(op, Op)
               and op.name == "ldmatrix"]
    assert layouts == [FragLayout.MMA_A, FragLayout.MMA_B]


def test_an_early_return_is_rejected_but_a_final_one_is_not() -> None:
    assert _codes('''
if block.x > 3:
    return
idx = fragment(i32, (BM,))
store(out.tile((1, BM), (block.y, block.x)), idx)
''') == ["CK002"]
    assert _codes('''
idx = fragment(i32, (BM,))
store(out.tile((1, BM), (block.y, block.x)), idx)
return
''') == []
