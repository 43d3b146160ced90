"""In-role overlap of asynchronous wgmma with CUDA-core work.

A wgmma runs on the tensor pipe after it issues; the warpgroup that issued it goes on with
CUDA-core instructions until a `wgmma_wait(n)` retires it.  The role chain credits that
overlap to the CUDA-core work issued while a group is in flight, and only to it: the same
work placed after `wgmma_wait(0)` is priced in series with the MMA.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cost_support import example, kernel_from_text

from cake_core.cost.calibration import default_coefficients
from cake_core.cost.model import predict, profile
from cake_core.cost.timing import _cuda_seconds, _Pricing
from cake_core.hardware import get_gpu
from cake_core.ir.kernel import Kernel

H200 = get_gpu("h200")
assert H200 is not None
DIMS = {"M": 4096, "K": 8192}

# One consumer warpgroup: per K tile, a wgmma into `acc` and element-wise math on `x`
# (which does not touch the accumulator, so it may run while the wgmma does).
_KERNEL = '''
BM, BN, BK, STAGES = 64, 128, 64, 3
M, K = dim("M"), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=8)
def overlap(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (BN, K)], C: Tensor[f32, (M, BN)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    with role("load", warps=range(0, 4), regs=40):
        for k in range(K // BK):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (0, k)), ab)
            ab.commit()
    with role("mma", warps=range(4, 8), regs=232):
        x = fragment(f32, (BM, BN), layout=wgmma_acc)
        y = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(K // BK):
            s = ab.wait()
            acc = fragment(f32, (BM, BN), layout=wgmma_acc)
            wgmma(acc, sa[s], sb[s].T)
%s
            ab.release()
            y = y + acc
        store(C.tile((BM, BN), (block.x, 0)), x + y)
'''
_MATH = "            x = exp2(x * 0.5) + 1.0"
_WAIT = "            wgmma_wait(0)"
OVERLAPS = _KERNEL % (_MATH + "\n" + _WAIT)
"""The math is issued while the wgmma runs, then the wait."""
WAITS_FIRST = _KERNEL % (_WAIT + "\n" + _MATH)
"""The wait comes right after the issue: the math cannot overlap the MMA."""

FA3 = Path(__file__).resolve().parents[1] / "data" / "attention_fwd_sm90_fa3.cake"


def _kernel(text: str, name: str) -> Kernel:
    return kernel_from_text(text, name + ".cake")


def _chain(k: Kernel, dims: dict[str, int]) -> tuple[float, float, float, float]:
    """(role chain, tensor T, CUDA-core C, waits S) of the consumer role, one block."""
    c = default_coefficients(H200)
    pr = _Pricing(profile(k, dims, H200), c)
    secs, idx, _, syn = pr.role_chains()["role:mma"]
    ops, times = pr.p.ops, pr.times
    t = sum(times[i].tc * ops[i].execs for i in idx)
    cu = _cuda_seconds(times, ops, idx)   # the FP32 lanes and the MUFU pipe side by side
    return secs, t, cu, sum(syn)


def test_math_between_issue_and_wait_overlaps_the_mma() -> None:
    k = _kernel(OVERLAPS, "overlaps")
    secs, t, cu, s = _chain(k, DIMS)
    kappa = default_coefficients(H200).pipe_contention
    assert t > 0 and cu > 0
    # what runs while the wgmma is in flight (x * 0.5, exp2, + 1.0) shares time with it;
    # `y + acc`, after the wait, does not
    pr = _Pricing(profile(k, DIMS, H200), default_coefficients(H200))
    idx = pr.role_chains()["role:mma"][1]
    over = pr.overlapped_cuda(("mma",))
    co = _cuda_seconds(pr.times, pr.p.ops, [i for i in idx if over[i]])
    cx = _cuda_seconds(pr.times, pr.p.ops, [i for i in idx if not over[i]])
    assert co > 0 and cx > 0
    assert secs == pytest.approx(max(t, co) + kappa * min(t, co) + cx + s)
    assert secs < t + cu + s


def test_math_after_the_wait_does_not_overlap() -> None:
    k = _kernel(WAITS_FIRST, "waits_first")
    secs, t, cu, s = _chain(k, DIMS)
    assert secs == pytest.approx(t + cu + s)


def test_the_two_orders_do_the_same_work_and_only_the_overlap_differs() -> None:
    a = _chain(_kernel(OVERLAPS, "overlaps"), DIMS)
    b = _chain(_kernel(WAITS_FIRST, "waits_first"), DIMS)
    assert a[1:] == pytest.approx(b[1:])
    assert a[0] < b[0]
    pa = predict(_kernel(OVERLAPS, "overlaps"), DIMS, H200)
    pb = predict(_kernel(WAITS_FIRST, "waits_first"), DIMS, H200)
    assert pa.seconds < pb.seconds


def test_overlapped_cuda_follows_the_groups_across_the_loop_back_edge() -> None:
    """The math issued after the wgmma runs with a group in flight; the
    `wgmma_wait(0)` retires it, and what follows it runs with none."""
    k = _kernel(OVERLAPS, "overlaps")
    pr = _Pricing(profile(k, DIMS, H200), default_coefficients(H200))
    over = pr.overlapped_cuda(("mma",))
    by_line = {pr.p.ops[i].op.prim.key: v for i, v in over.items()}
    assert by_line["exp2"] is True
    assert by_line["wgmma_wait"] is False


def test_the_fa3_attention_keeps_s_in_flight_during_its_softmax() -> None:
    k = kernel_from_text(FA3.read_text(encoding="utf-8"), "attention_fwd_sm90_fa3.cake")
    pr = _Pricing(profile(k, {"BH": 256, "S": 4096}, H200), default_coefficients(H200))
    over = pr.overlapped_cuda(("wg0", "wg1"))
    exp2 = [v for i, v in over.items() if pr.p.ops[i].op.prim.key == "exp2"]
    assert exp2 and all(exp2)
    plain = example("attention_fwd_sm90.cake")
    pr = _Pricing(profile(plain, {"BH": 256, "S": 4096}, H200), default_coefficients(H200))
    over = pr.overlapped_cuda(("softmax",))
    exp2 = [v for i, v in over.items() if pr.p.ops[i].op.prim.key == "exp2"]
    assert exp2 and not any(exp2)
