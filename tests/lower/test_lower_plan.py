"""Whole-kernel decisions: declaration hoisting, layout inference, arrival counts, #line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.elab.bindings import bindings_of
from cake_core.lower import lower_source
from cake_core.lower.emitter import Emitter, c_identifier
from cake_core.lower.layouts import COL, ROW
from cake_core.lower.plan import build_plan
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]

HOIST = """\
M = dim("M")

@kernel(arch="sm_80", grid=(cdiv(M, 128),), warps=4)
def last_copy(X: Tensor[f32, (M,)], Y: Tensor[f32, (M,)]):
    for i in range(2):
        x = load(X.tile((128,), (block.x,)))
    store(Y.tile((128,), (block.x,)), x)
"""


def test_a_name_read_after_its_loop_is_declared_before_it() -> None:
    res = lower_source(SourceFile(HOIST, "h.cake"))
    assert res.diagnostics == [] and res.cu is not None
    body = res.cu.split("last_copy(")[1]
    assert body.index("float x[1];") < body.index("for (int i = 0; i < 2; ++i)")
    assert "float x[1]; {" not in body  # the load inside the loop assigns, not declares


def test_layouts_follow_the_accumulator_through_math() -> None:
    text = (ROOT / "examples" / "kmeans_assign_sm90.cake").read_text(encoding="utf-8")
    res = check_text(text, "k.cake")
    k = res.program.kernels[0]
    plan = build_plan(k, bindings_of(k, res.parse.module))
    by_name = {key[1]: d for key, d in plan.dists.items() if key[0] == "dist"}
    assert by_name["dot"].parent.kind == "wgmma_acc" and by_name["dot"].axes == (ROW, COL)
    assert by_name["cn"].axes == (COL,)  # one value per accumulator column the thread holds
    assert by_name["dist"].parent.kind == "wgmma_acc"
    for name in ("v", "i", "best_v", "best_i", "closer"):
        assert by_name[name].axes == (ROW,) and by_name[name].compatible(by_name["v"])
    assert plan.pipes["chunks"].full_count == 1 and plan.pipes["chunks"].empty_count == 8
    assert plan.groups["load"].single and not plan.groups["dist"].single


PER_WARP_RELEASE = """\
BM, BK, S = 64, 64, 2
M, K = dim("M"), dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=8)
def k(A: Tensor[bf16, (M, K)], C: Tensor[bf16, (M, BK)]):
    sa = smem(bf16, (S, BM, BK), layout=swizzle(128))
    p = pipeline(stages=S, producer="load", consumer="use")
    with role("load", warps=range(0, 4)):
        for k in range(cdiv(K, BK)):
            s = p.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), p)
            p.commit()
    with role("use", warps=range(4, 8)):
        for k in range(cdiv(K, BK)):
            s = p.wait()
            x = load(sa[s])
            if warp.rank == 0:
                p.release()
            else:
                p.release()
            store(C.tile((BM, BK), (block.x, 0)), x)
"""


def test_an_arrival_under_a_per_warp_condition_is_not_lowered() -> None:
    """The verifier refuses this kernel (CK301); the plan refuses it on its own too, since
    it counts one arrival per warp."""
    from cake_core.check import check_source
    from cake_core.lower.plan import LowerError

    res = check_source(SourceFile(PER_WARP_RELEASE, "w.cake"), passes=[])
    assert res.errors == []
    k = res.program.kernels[0]
    with pytest.raises(LowerError, match="every warp must reach it") as info:
        build_plan(k, bindings_of(k, res.parse.module))
    assert res.source.snippet(info.value.span) == "p.release()"


def test_emitter_maps_lines_only_where_the_count_drifts() -> None:
    em = Emitter("k.cake")
    em.emit("int a = 0;", 4)
    em.emit("int b = 0;", 5)     # the next source line: no directive needed
    em.emit("// comment", 9)     # trivial lines never need one
    em.emit("int c = 0;", 5)     # back to line 6 (1-based): a directive
    em.emit("helper();", None)   # the .cu's own code: back to physical numbering
    out = em.render("k.cu").splitlines()
    assert out[0] == '#line 5 "k.cake"' and out[1] == "int a = 0;" and out[2] == "int b = 0;"
    assert out[4] == '#line 6 "k.cake"' and out[5] == "int c = 0;"
    assert out[6] == '#line 8 "k.cu"' and out[7] == "helper();"


def test_names_the_prelude_or_the_compiler_reserve_get_a_prefix_not_a_hang() -> None:
    # A suffix never stops a name from starting with `cake_` or `__`: appending one
    # looped forever on the expert GEMM's `__pair...` temporaries.
    assert c_identifier("cake_mbar") == "u_cake_mbar"
    assert c_identifier("__pair_x") == "u___pair_x"
    assert c_identifier("__pair_x", {"u___pair_x"}) == "u___pair_x_"
    assert c_identifier("int") == "int_"
    assert c_identifier("acc") == "acc"
