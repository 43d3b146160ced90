"""The multi-function unit is a pipe of its own: transcendentals and FP32 math overlap.

Per element, `exp2` takes one FP32 issue slot and one MUFU result, which the MUFU pipe
delivers at an eighth of the FP32 lanes' rate; `n` adds take `n` slots.  The CUDA-core
time of `exp2` plus `n` adds is therefore `max(1 + n, 8)` FP32-lane operations per
element, not `8 + n`: the adds hide under the exp2s until there are more than seven.
"""

from __future__ import annotations

import pytest
from cost_support import kernel_from_text

from cake_core.cost.calibration import default_coefficients
from cake_core.cost.model import profile
from cake_core.cost.timing import _cuda_seconds, _Pricing
from cake_core.hardware import get_gpu

H200 = get_gpu("h200")
assert H200 is not None

_KERNEL = '''
M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, 64),), warps=4)
def mixed(X: Tensor[f32, (M, 128)], Y: Tensor[f32, (M, 128)]):
    x = load(X.tile((64, 128), (block.x, 0)))
%s
    store(Y.tile((64, 128), (block.x, 0)), x)
'''


def _cuda(adds: int, exp2: bool) -> float:
    body = (["    x = exp2(x)"] if exp2 else []) + ["    x = x + 1.0"] * adds
    k = kernel_from_text(_KERNEL % "\n".join(body), "mixed.cake")
    assert H200 is not None
    pr = _Pricing(profile(k, {"M": 64}, H200), default_coefficients(H200))
    return _cuda_seconds(pr.times, pr.p.ops, list(range(len(pr.p.ops))))


@pytest.mark.parametrize("adds", [0, 3, 7, 12])
def test_adds_hide_under_the_exp2s_until_they_outnumber_the_mufu_rate(adds: int) -> None:
    one_add = _cuda(1, exp2=False) - _cuda(0, exp2=False)  # one FP32 op per element
    assert one_add > 0
    got = _cuda(adds, exp2=True) - _cuda(0, exp2=False)
    assert got == pytest.approx(max(1 + adds, 8) * one_add, rel=1e-6)
