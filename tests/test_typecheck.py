"""The IR builder and type checker: what they fold, what they build, what they reject.

Each test states one fact about the front end on a small kernel, read through the typed
IR (`CheckResult.program`) or through the diagnostics; the seeded-error corpus covers
ranges and messages file by file, these cover the semantics.
"""

from __future__ import annotations

import textwrap

import pytest
from kernels import GEMM_SM90

from cake_core.check import CheckResult, check_text
from cake_core.diagnostics.model import Diagnostic
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Op, Role
from cake_core.ir.symbolic import BinExpr, Const, Dim, Var, divides
from cake_core.ir.types import (
    DType,
    FragLayout,
    FragmentType,
    IntType,
    PipelineType,
    SmemLayout,
    SmemType,
    StageType,
    TileType,
    TupleType,
)


def check(text: str, arch: str | None = None) -> CheckResult:
    """Parse and type-check only: verifier passes have tests of their own."""
    return check_text(textwrap.dedent(text), "t.cake", arch=arch, passes=[])


def clean(text: str, arch: str | None = None) -> Kernel:
    """The single kernel of a program that must check without any diagnostic."""
    r = check(text, arch)
    assert r.diagnostics == [], [(d.code, d.message) for d in r.diagnostics]
    assert r.program is not None and len(r.program.kernels) == 1
    return r.program.kernels[0]


def only(text: str, arch: str | None = None) -> Diagnostic:
    """The one diagnostic of a program with one mistake."""
    r = check(text, arch)
    assert len(r.diagnostics) == 1, [(d.code, d.message) for d in r.diagnostics]
    return r.diagnostics[0]


def elementwise(body: str, arch: str = "sm_80", params: str = "") -> str:
    """A one-block kernel over 64x128 f32 tiles; `body` is indented kernel code."""
    return (
        'BR, BC = 64, 128\nR, C = dim("R"), dim("C", max=128)\n\n'
        f'@kernel(arch="{arch}", grid=(cdiv(R, BR),), warps=4)\n'
        f"def k(X: Tensor[f32, (R, C)], Y: Tensor[f32, (R, C)]{params}):\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
    )


def ops(k: Kernel, name: str) -> list[Op]:
    return [op for op in k.ops() if op.name == name]


# --- constant folding -------------------------------------------------------------------
def test_top_level_constants_fold() -> None:
    r = check("""\
        BM, BN = 128, 2 * 64
        BK = BM // 2 - 32 % 5
        TILES = cdiv(1000, BM)
        BIG = max(BM, BN) * min(3, 4) + (1 << 4)
        STAGES = 4 if BM >= 128 else 2
        """)
    assert r.program is not None
    consts = {n: v.sym.const for n, v in r.program.constants.items() if v.sym is not None}
    assert consts == {"BM": 128, "BN": 128, "BK": 62, "TILES": 8, "BIG": 400, "STAGES": 4}
    assert [d.code for d in r.diagnostics] == ["CK004"]  # constants alone: no kernel


def test_tile_shapes_fold_through_expressions() -> None:
    k = clean(elementwise("""\
        x = load(X.tile((BR // 2 * 2, cdiv(BC * 2, 2)), (block.x, 0)))
        store(Y.tile((BR, BC), (block.x, 0)), x)
        """))
    (load,) = ops(k, "load")
    assert load.results[0].type == FragmentType(DType.F32, (Const(64), Const(128)))


def test_nested_tuple_unpacking_at_top_level() -> None:
    r = check("(BM, BN), BK = (128, 256), 64\n")
    assert r.program is not None
    got = {n: v.sym.const for n, v in r.program.constants.items() if v.sym is not None}
    assert got == {"BM": 128, "BN": 256, "BK": 64}


def test_unpacking_count_mismatch_is_one_finding() -> None:
    r = check("""\
        BM, BN, BK = 128, 256
        X = BM + BK
        """)
    assert sorted(d.code for d in r.diagnostics) == ["CK004", "CK104"]
    assert any("cannot unpack 2 values into 3 names" in d.message for d in r.diagnostics)


def test_integer_division_by_zero() -> None:
    r = check("BM = 128\nZ = BM // (BM - 128)\n")
    assert sorted(d.code for d in r.diagnostics) == ["CK004", "CK113"]


# --- dims -------------------------------------------------------------------------------
def test_dims_carry_divisibility_and_bounds() -> None:
    r = check('M, K = dim("M"), dim("K", multiple_of=64, max=8192)\nKT = K // 64\n')
    assert r.program is not None
    assert r.program.dims == {"M": Dim("M"), "K": Dim("K", 64, 8192)}
    kt = r.program.constants["KT"].sym
    assert isinstance(kt, BinExpr) and kt.is_launch_constant and kt.const is None
    assert divides(Dim("K", 64), 32) and not divides(Dim("M"), 2)


def test_dims_stay_symbolic_in_tensor_types_and_grid() -> None:
    k = clean(GEMM_SM90)
    a = k.params[0].value.type
    assert a.shape == (Dim("M"), Dim("K", 64))  # type: ignore[attr-defined]
    assert [str(g) for g in k.grid] == ["cdiv(M, 128)", "cdiv(N, 256)"]
    assert k.dims["K"].multiple_of == 64


def test_dim_inside_kernel_is_rejected() -> None:
    d = only(elementwise("""\
        Z = dim("Z")
        store(Y.tile((BR, BC), (block.x, 0)), load(X.tile((BR, BC), (block.x, 0))))
        """))
    assert d.code == "CK005"


# --- shared-memory allocations -----------------------------------------------------------------
def test_smem_allocations_bytes_and_alignment() -> None:
    k = clean(GEMM_SM90)
    allocs = {a.name: a for a in k.smem}
    sa, sb, ab = allocs["sa"], allocs["sb"], allocs["ab"]
    assert (sa.shape, sa.nbytes, sa.align) == ((4, 128, 64), 4 * 128 * 64 * 2, 1024)
    assert (sb.shape, sb.nbytes, sb.align) == ((4, 256, 64), 4 * 256 * 64 * 2, 1024)
    assert sa.layout == SmemLayout("row", 128)
    # a pipeline owns a full and an empty mbarrier per stage, 8 bytes each
    assert (ab.kind, ab.shape, ab.nbytes, ab.align) == ("barrier", (8,), 64, 8)


@pytest.mark.parametrize(("layout", "nbytes", "align"), [
    ("row_major", 64 * 32 * 2, 16),
    ("swizzle(64)", 64 * 32 * 2, 512),
    ("swizzle(32)", 64 * 32 * 2, 256),
    ("padded(8)", 64 * (32 + 8) * 2, 16),
])
def test_smem_layout_sets_size_and_alignment(layout: str, nbytes: int, align: int) -> None:
    k = clean(elementwise(f"""\
        buf = smem(f16, (64, 32), layout={layout})
        store(buf, cast(load(X.tile((64, 32), (block.x, 0))), f16))
        syncthreads()
        store(Y.tile((64, 32), (block.x, 0)), cast(load(buf), f32))
        """))
    (buf,) = k.smem
    assert (buf.nbytes, buf.align) == (nbytes, align)


# --- views ------------------------------------------------------------------------------
def test_view_types() -> None:
    k = clean(GEMM_SM90)
    (wg,) = ops(k, "wgmma")
    a, b = wg.args["a"].type, wg.args["b"].type
    assert isinstance(a, SmemType) and isinstance(b, SmemType)
    assert a.shape == (Const(128), Const(64)) and a.buffer == "sa" and not a.transposed
    assert a.buffer_shape == (Const(4), Const(128), Const(64)) and a.is_view
    assert b.shape == (Const(64), Const(256)) and b.buffer == "sb" and b.transposed
    loads = ops(k, "tma_load")
    src = loads[0].args["src"].type
    assert src == TileType(DType.BF16, (Const(128), Const(64)), "A", (Dim("M"), Dim("K", 64)))


def test_smem_tile_view_and_transpose() -> None:
    k = clean("""\
        BM, BN, BK = 128, 128, 32
        M, N, K = dim("M"), dim("N"), dim("K", multiple_of=32)

        @kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
        def g(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
            sa = smem(f16, (2, BM, BK), layout=swizzle(64))
            sb = smem(f16, (2, BN, BK), layout=swizzle(64))
            acc = fragment(f32, (64, 64), layout=mma_acc)
            for k in range(cdiv(K, BK)):
                s = k % 2
                cp_async(sa[s], A.tile((BM, BK), (block.x, k)))
                cp_async(sb[s], B.tile((BN, BK), (block.y, k)))
                cp_async_commit()
                cp_async_wait(0)
                syncthreads()
                for kk in range(BK // 16):
                    a = ldmatrix(sa[s].tile((64, 16), (warp.id // 2, kk)))
                    b = ldmatrix(sb[s].tile((64, 16), (warp.id % 2, kk)).T)
                    mma_sync(acc, a, b)
                syncthreads()
            store(C.tile((64, 64), (block.x * 2 + warp.id // 2, block.y * 2 + warp.id % 2)),
                  cast(acc, f16))
        """)
    lm = ops(k, "ldmatrix")
    a_src, b_src = lm[0].args["src"].type, lm[1].args["src"].type
    assert isinstance(a_src, SmemType) and a_src.shape == (Const(64), Const(16))
    assert isinstance(b_src, SmemType) and b_src.shape == (Const(16), Const(64))
    assert b_src.transposed and b_src.buffer == "sb"
    assert lm[0].results[0].type == FragmentType(DType.F16, (Const(64), Const(16)),
                                                 FragLayout.MMA_A)


def test_smem_view_must_leave_a_tile() -> None:
    d = only(elementwise("""\
        buf = smem(f32, (2, 64, 128))
        store(buf[0, 1, 2], load(X.tile((BR, BC), (block.x, 0))))
        """))
    assert d.code == "CK111"


def test_smem_index_out_of_range() -> None:
    d = only(elementwise("""\
        buf = smem(f32, (2, 64, 128))
        store(buf[2], load(X.tile((BR, BC), (block.x, 0))))
        """))
    assert d.code == "CK111" and "out of range" in d.message


def test_transpose_needs_two_dimensions() -> None:
    d = only(elementwise("""\
        buf = smem(f32, (2, 64))
        x = load(buf[0].T)
        """))
    assert d.code == "CK105"


# --- roles ------------------------------------------------------------------------------
def test_role_bookkeeping() -> None:
    k = clean(GEMM_SM90)
    assert list(k.roles) == ["load", "mma"]
    load, mma = k.roles["load"], k.roles["mma"]
    assert (load.warp_start, load.warp_stop, load.regs, load.warps) == (0, 4, 40, 4)
    assert (mma.warp_start, mma.warp_stop, mma.regs, mma.warps) == (4, 12, 232, 8)
    assert [type(n) for n in k.body[-2:]] == [Role, Role]
    by_role = {op.name: op.role for op in k.ops()}
    assert by_role["tma_load"] == "load" and by_role["wgmma"] == "mma"
    assert by_role["pipeline"] is None  # declared before any role: shared by the block
    pipe = k.values["ab"].type
    assert pipe == PipelineType("ab", 4, "load", ("mma",))
    stage = ops(k, "acquire")[0].results[0].type
    assert stage == StageType("ab", 4, "producer")


@pytest.mark.parametrize(("roles", "needle"), [
    ('with role("a", warps=range(0, 4)):\n    pass\nwith role("a", warps=range(4, 8)):\n'
     "    pass\n", "declared twice"),
    ('with role("a", warps=range(0, 4)):\n    with role("b", warps=range(4, 8)):\n'
     "        pass\n", "do not nest"),
    ('for i in range(2):\n    with role("a", warps=range(0, 4)):\n        pass\n',
     "not inside a loop"),
    ('with role("a", warps=range(4, 0)):\n    pass\n', "contiguous"),
])
def test_malformed_roles(roles: str, needle: str) -> None:
    d = only(elementwise(roles))
    assert d.code == "CK112" and needle in d.message


def test_pipeline_ops_belong_to_their_side() -> None:
    text = GEMM_SM90.replace("s = ab.wait()", "s = ab.acquire()")
    d = only(text)
    assert d.code == "CK112" and "producer operation" in d.message


# --- loops and compile-time branches ------------------------------------------------------
def test_loop_vars_are_bounded_runtime_ints() -> None:
    k = clean(GEMM_SM90)
    loops = [n for n in k.walk() if isinstance(n, ForOp)]
    assert len(loops) == 2
    var = loops[0].var
    assert isinstance(var.type, IntType) and isinstance(var.sym, Var)
    # K is declared a multiple of 64, so cdiv(K, 64) folds to an exact division
    assert var.sym.lo == Const(0) and str(var.sym.hi) == "K // 64"
    assert loops[0].step == Const(1) and str(loops[0].trip_count) == "K // 64"
    assert loops[0].role == "load" and loops[1].role == "mma"


def test_range_with_start_and_step() -> None:
    k = clean(elementwise("""\
        for j in range(1, 9, 2):
            store(Y.tile((BR, BC), (block.x, j)), load(X.tile((BR, BC), (block.x, j))))
        """))
    (loop,) = [n for n in k.walk() if isinstance(n, ForOp)]
    assert (loop.start, loop.stop, loop.step) == (Const(1), Const(9), Const(2))
    assert loop.trip_count == Const(4)


def test_loop_must_run_over_range() -> None:
    d = only(elementwise("""\
        for j in (0, 1):
            store(Y.tile((BR, BC), (block.x, j)), load(X.tile((BR, BC), (block.x, j))))
        """))
    assert d.code == "CK002"


def test_compile_time_if_keeps_only_the_taken_branch() -> None:
    text = elementwise("""\
        if BR >= 64 and not BC < 64:
            x = load(X.tile((BR, BC), (block.x, 0)))
        else:
            x = this_name_is_never_looked_at
        store(Y.tile((BR, BC), (block.x, 0)), x)
        """)
    k = clean(text)
    assert not any(isinstance(n, IfOp) for n in k.walk())
    assert [op.name for op in k.ops()] == ["tile", "load", "tile", "store"]


def test_runtime_if_becomes_an_if_op() -> None:
    k = clean(elementwise("""\
        if block.x + 1 < cdiv(R, BR):
            store(Y.tile((BR, BC), (block.x, 0)), load(X.tile((BR, BC), (block.x, 0))))
        """))
    (node,) = [n for n in k.walk() if isinstance(n, IfOp)]
    assert len(node.then) == 4 and node.orelse == []


def test_if_on_a_fragment_is_rejected() -> None:
    d = only(elementwise("""\
        x = load(X.tile((BR, BC), (block.x, 0)))
        if x:
            store(Y.tile((BR, BC), (block.x, 0)), x)
        """))
    assert d.code == "CK104" and "where()" in d.message


def test_loop_carried_fragment_keeps_its_type() -> None:
    clean(elementwise("""\
        acc = fragment(f32, (BR, BC))
        for j in range(4):
            acc = acc + load(X.tile((BR, BC), (block.x, j)))
        store(Y.tile((BR, BC), (block.x, 0)), acc)
        """))
    d = only(elementwise("""\
        acc = fragment(f32, (BR, BC))
        for j in range(4):
            acc = row_sum(acc)
        store(Y.tile((BR, 1), (block.x, 0)), unsqueeze(acc, 1))
        """))
    assert d.code == "CK104" and "loop-carried" in d.message


# --- fragments and math -----------------------------------------------------------------
def test_fragment_broadcasting() -> None:
    k = clean(elementwise("""\
        x = load(X.tile((BR, BC), (block.x, 0)))
        m = row_max(x)
        d = x - unsqueeze(m, 1)
        e = exp(d * 0.5)
        store(Y.tile((BR, BC), (block.x, 0)), e)
        """))
    types = {op.name: op.results[0].type for op in k.ops() if op.results}
    assert types["row_max"] == FragmentType(DType.F32, (Const(64),))
    assert types["unsqueeze"] == FragmentType(DType.F32, (Const(64), Const(1)))
    assert types["sub"] == FragmentType(DType.F32, (Const(64), Const(128)))
    assert types["mul"] == FragmentType(DType.F32, (Const(64), Const(128)))


def test_shapes_that_do_not_broadcast() -> None:
    d = only(elementwise("""\
        x = load(X.tile((BR, BC), (block.x, 0)))
        store(Y.tile((BR, BC), (block.x, 0)), x - row_max(x))
        """))
    assert d.code == "CK105" and "broadcast" in d.message


def test_mixed_dtypes_need_a_cast() -> None:
    d = only(elementwise("""\
        x = load(X.tile((BR, BC), (block.x, 0)))
        store(Y.tile((BR, BC), (block.x, 0)), x + cast(x, f16))
        """))
    assert d.code == "CK106"


def test_row_argmin_returns_a_tuple() -> None:
    k = clean(elementwise("""\
        x = load(X.tile((BR, BC), (block.x, 0)))
        best, idx = row_argmin(x)
        store(Y.tile((BR, 1), (block.x, 0)), unsqueeze(best + cast(idx, f32), 1))
        """))
    (op,) = ops(k, "row_argmin")
    assert [r.type for r in op.results] == [FragmentType(DType.F32, (Const(64),)),
                                            FragmentType(DType.I32, (Const(64),))]
    assert [r.name for r in op.results] == ["best", "idx"]


def test_row_argmin_result_is_a_tuple_value() -> None:
    d = only(elementwise("""\
        x = load(X.tile((BR, BC), (block.x, 0)))
        pair = row_argmin(x)
        store(Y.tile((BR, 1), (block.x, 0)), unsqueeze(pair, 1))
        """))
    assert d.code == "CK104" and "must be a register fragment" in d.message


def test_tuple_results_index_like_tuples() -> None:
    k = clean(elementwise("""\
        x = load(X.tile((BR, BC), (block.x, 0)))
        pair = row_argmin(x)
        store(Y.tile((BR, 1), (block.x, 0)), unsqueeze(pair[0], 1))
        """))
    assert isinstance(ops(k, "row_argmin")[0].results[0].type, FragmentType)
    assert not isinstance(k.values["pair"].type, FragmentType)
    assert isinstance(k.values["pair"].type, TupleType)


# --- MMA shapes -------------------------------------------------------------------------
def wgmma_kernel(acc: str, a: str, b: str, b_expr: str = "sb.T") -> str:
    return f"""\
        M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)

        @kernel(arch="sm_90a", grid=(cdiv(M, 128),), warps=4)
        def g(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[f32, (M, N)]):
            sa = smem(bf16, {a}, layout=swizzle(128))
            sb = smem(bf16, {b}, layout=swizzle(128))
            acc = fragment(f32, {acc}, layout=wgmma_acc)
            wgmma(acc, sa, {b_expr})
            wgmma_wait(0)
            store(C.tile({acc}, (block.x, 0)), acc)
        """


@pytest.mark.parametrize(("acc", "a", "b"), [
    ("(128, 256)", "(128, 64)", "(256, 64)"),
    ("(64, 8)", "(64, 16)", "(8, 16)"),
    ("(192, 64)", "(192, 32)", "(64, 32)"),
])
def test_wgmma_shapes_accepted(acc: str, a: str, b: str) -> None:
    k = clean(wgmma_kernel(acc, a, b))
    assert len(ops(k, "wgmma")) == 1


@pytest.mark.parametrize(("acc", "a", "b", "b_expr", "needle"), [
    ("(96, 64)", "(96, 64)", "(64, 64)", "sb.T", "64-row slabs"),
    ("(64, 264)", "(64, 64)", "(264, 64)", "sb.T", "multiple of 8 up to 256"),
    ("(64, 64)", "(64, 24)", "(64, 24)", "sb.T", "K must be a multiple of 16"),
    ("(64, 64)", "(64, 64)", "(64, 32)", "sb.T", "inner dimensions differ"),
    ("(64, 128)", "(64, 64)", "(128, 64)", "sb", "transposed"),
])
def test_wgmma_shapes_rejected(acc: str, a: str, b: str, b_expr: str, needle: str) -> None:
    d = only(wgmma_kernel(acc, a, b, b_expr))
    assert d.code == "CK105" and needle in d.message


def test_wgmma_accumulator_layout_and_dtype() -> None:
    text = wgmma_kernel("(64, 64)", "(64, 64)", "(64, 64)")
    d = only(text.replace("layout=wgmma_acc", "layout=mma_acc"))
    assert d.code == "CK104" and "wgmma_acc" in d.message
    text = text.replace("acc = fragment(f32", "acc = fragment(f16")
    bad = text.replace("store(C.tile((64, 64), (block.x, 0)), acc)",
                       "store(C.tile((64, 64), (block.x, 0)), cast(acc, f32))")
    d = only(bad)
    assert d.code == "CK106" and "accumulates in f32" in d.message
    # reported where the dtype is chosen, with the MMA as related information
    assert "fragment(f16" in bad.splitlines()[d.span.start.line]
    assert ["wgmma(" in bad.splitlines()[r.span.start.line] for r in d.related] == [True]


MMA_SYNC = """\
    M, N, K = dim("M"), dim("N"), dim("K", multiple_of=32)

    @kernel(arch="sm_80", grid=(cdiv(M, 64),), warps=1)
    def g(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f32, (M, N)]):
        sa = smem(f16, {a})
        sb = smem(f16, {b})
        acc = fragment(f32, {acc}, layout=mma_acc)
        cp_async(sa, A.tile({a}, (block.x, 0)))
        cp_async(sb, B.tile({b}, (0, 0)))
        cp_async_commit()
        cp_async_wait(0)
        syncthreads()
        mma_sync(acc, ldmatrix(sa), ldmatrix(sb.T))
        store(C.tile({acc}, (block.x, 0)), acc)
    """


def test_mma_sync_shape_accepted() -> None:
    k = clean(MMA_SYNC.format(acc="(64, 32)", a="(64, 32)", b="(32, 32)"))
    assert len(ops(k, "mma_sync")) == 1


@pytest.mark.parametrize(("acc", "a", "b", "needle"), [
    ("(64, 32)", "(64, 32)", "(48, 32)", "!= a rows x b columns"),
    ("(64, 32)", "(64, 32)", "(32, 16)", "inner dimensions differ"),
    ("(24, 32)", "(24, 32)", "(32, 32)", "m16n8k16"),
])
def test_mma_sync_shape_rejected(acc: str, a: str, b: str, needle: str) -> None:
    d = only(MMA_SYNC.format(acc=acc, a=a, b=b))
    assert d.code == "CK105" and needle in d.message


# --- arch gating ------------------------------------------------------------------------
TMA_SM80 = """\
    BR, BC = 64, 128
    R, C = dim("R"), dim("C", max=128)

    @kernel(arch="sm_80", grid=(cdiv(R, BR),), warps=4)
    def k(X: Tensor[f32, (R, C)], Y: Tensor[f32, (R, C)]):
        buf = smem(f32, (BR, BC))
        bar = mbarrier(count=1)
        tma_load(buf, X.tile((BR, BC), (block.x, 0)), bar)
        store(Y.tile((BR, BC), (block.x, 0)), load(buf))
    """


def test_tma_load_on_sm80_is_arch_unsupported() -> None:
    d = only(TMA_SM80)
    assert d.code == "CK108"
    assert "`tma_load` needs tma" in d.message and "sm_80" in d.message
    assert any("cp_async" in n for n in d.notes)
    assert [r.message for r in d.related] == ["target arch set here"]


def test_arch_override_replaces_the_decorator() -> None:
    """`--arch` (check_source's `arch=`) wins over `@kernel(arch=...)`, both ways."""
    r = check(TMA_SM80, arch="sm_90a")
    assert [d.code for d in r.errors] == []
    assert r.program is not None and r.program.kernels[0].arch == "sm_90a"
    r = check(GEMM_SM90, arch="sm_80")
    assert {d.code for d in r.diagnostics} == {"CK108"}
    # one finding per missing primitive, its other uses attached as related ranges
    assert [d.message.split("`")[1] for d in r.diagnostics] == ["tma_load", "wgmma",
                                                                "wgmma_wait"]
    tma = r.diagnostics[0]
    assert [x.message for x in tma.related] == ["target arch set here",
                                                "`tma_load` is also used here"]


def test_arch_override_supplies_a_missing_arch() -> None:
    text = elementwise("""\
        store(Y.tile((BR, BC), (block.x, 0)), load(X.tile((BR, BC), (block.x, 0))))
        """).replace('arch="sm_80", ', "")
    assert only(text).code == "CK109"
    assert clean(text, arch="sm_80").arch == "sm_80"


def test_unknown_arch_suggests_the_nearest() -> None:
    d = only(GEMM_SM90.replace('"sm_90a"', '"sm_91a"'))
    assert d.code == "CK108" and 'did you mean "sm_90a"' in d.message
    assert d.fixes and d.fixes[0].edits[0].new_text == '"sm_90a"'


def test_wgmma_needs_sm90a_not_sm90() -> None:
    r = check(GEMM_SM90, arch="sm_90")
    assert [(d.code, d.message.split("`")[1]) for d in r.diagnostics] == [
        ("CK108", "wgmma"), ("CK108", "wgmma_wait")]
    assert clean(GEMM_SM90, arch="sm_90a").arch == "sm_90a"


@pytest.mark.parametrize("extent", ["div(R, 2)", "maximum(R, BR)", "R + 1.5"])
def test_device_math_in_a_tensor_extent_is_a_located_finding(extent: str) -> None:
    """A primitive call in a parameter's extents runs nowhere: the signature reports it
    (once, at the shape) instead of the compiler failing on an op outside any body."""
    text = elementwise("""\
        store(Y.tile((BR, BC), (block.x, 0)), load(X.tile((BR, BC), (block.x, 0))))
        """, params=f", Z: Tensor[f32, ({extent}, C)]")
    d = only(text)
    assert d.code == "CK109" and "tensor extents must be constants or dim() sizes" in d.message
    assert f"Z: Tensor[f32, ({extent}, C)]" in text.splitlines()[d.span.start.line]
