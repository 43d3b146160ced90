"""The interpreter: control flow, name bindings, math and per-warp processes."""

from __future__ import annotations

import numpy as np

from cake_core.sim import SimKernel, simulate
from cake_core.tasks import as_dtype

BRANCHY = """
BM, BN = 16, 32
M = dim("M")

@kernel(arch="sm_80", grid=(cdiv(M, BM),), warps=1)
def branchy(A: Tensor[f32, (M, BN)], C: Tensor[f32, (M, BN)], scale: f32):
    x = load(A.tile((BM, BN), (block.x, 0)))
    y = x * scale
    z = y
    if block.x % 2 == 0 and block.x < 4:
        z = z + 1.0
    elif block.x == 5:
        z = -z
    else:
        z = maximum(z, 0.0)
    acc = fragment(f32, (BM, BN))
    for i in range(1, 7, 2):
        acc = acc + z
    acc += z
    store(C.tile((BM, BN), (block.x, 0)), acc)
"""


def test_control_flow_and_bindings() -> None:
    sk = SimKernel.from_text(BRANCHY, "branchy.cake")
    rng = np.random.default_rng(0)
    m = 16 * 7
    a = rng.standard_normal((m, 32)).astype(np.float32)
    r = simulate(sk, {"M": m}, {"A": a, "scale": 3.0})
    assert r.diagnostics == []
    y = a * np.float32(3.0)
    want = np.empty_like(a)
    for b in range(7):
        rows = slice(16 * b, 16 * b + 16)
        if b % 2 == 0 and b < 4:
            z = y[rows] + 1
        elif b == 5:
            z = -y[rows]
        else:
            z = np.maximum(y[rows], 0)
        want[rows] = 4 * z
    np.testing.assert_allclose(r.outputs["C"], want, rtol=1e-6)


ROWS = """
BM, BN = 64, 128
M = dim("M")

@kernel(arch="sm_80", grid=(cdiv(M, BM),), warps=4)
def rows(X: Tensor[bf16, (M, BN)], best: Tensor[i32, (M,)], top: Tensor[f32, (M,)],
         soft: Tensor[bf16, (M, BN)]):
    x = cast(load(X.tile((BM, BN), (block.x, 0))), f32)
    v, i = row_argmax(x)
    store(best.tile((BM,), (block.x,)), i)
    store(top.tile((BM,), (block.x,)), v)
    e = exp(x - unsqueeze(row_max(x), 1))
    store(soft.tile((BM, BN), (block.x, 0)), cast(e / unsqueeze(row_sum(e), 1), bf16))
"""


def test_row_reductions_casts_and_clipping() -> None:
    sk = SimKernel.from_text(ROWS, "rows.cake")
    m = 100  # a ragged last block: rows past M are zero-filled, then clipped
    x = as_dtype(np.random.default_rng(1).standard_normal((m, 128)), "bf16")
    x[3, 7] = x[3, 9] = 50.0  # a tie: the smaller column wins
    r = simulate(sk, {"M": m}, {"X": x})
    assert r.diagnostics == []
    np.testing.assert_array_equal(r.outputs["best"], x.argmax(1))
    assert r.outputs["best"][3] == 7
    np.testing.assert_array_equal(r.outputs["top"], x.max(1))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(r.outputs["soft"], e / e.sum(1, keepdims=True), atol=4e-3)


def test_roles_split_per_warp_when_code_reads_warp_id() -> None:
    sk = SimKernel.from_text(ROWS, "rows.cake")
    assert [p.label for p in sk.procs] == ["the block"]
    text = """
M = dim("M")

@kernel(arch="sm_90a", grid=(1,), warps=8)
def per_warp(A: Tensor[f32, (M, 32)], C: Tensor[f32, (M, 32)]):
    with role("a", warps=range(0, 4)):
        store(C.tile((1, 32), (warp.id, 0)), load(A.tile((1, 32), (warp.id, 0))))
    with role("b", warps=range(4, 8)):
        store(C.tile((4, 32), (1, 0)), load(A.tile((4, 32), (1, 0))))
"""
    sk = SimKernel.from_text(text, "per_warp.cake")
    assert [p.label for p in sk.procs] == [
        "role 'a' warp 0", "role 'a' warp 1", "role 'a' warp 2", "role 'a' warp 3", "role 'b'"]
    a = np.arange(8 * 32, dtype=np.float32).reshape(8, 32)
    r = simulate(sk, {"M": 8}, {"A": a})
    assert r.diagnostics == []
    np.testing.assert_array_equal(r.outputs["C"], a)
