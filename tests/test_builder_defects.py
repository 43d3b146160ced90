"""The IR builder keeps kernels apart and names values by where they come from.

Each test pins one way the builder once went wrong: a kernel retracting another kernel's
findings, a kernel renaming a global, a range that left out the last warpgroup, and
use-tracking by `id()` that a new value could inherit from a dead one.
"""

from __future__ import annotations

from kernels import GEMM_SM90_BLOCK

from cake_core.check import check_text
from cake_core.diagnostics import codes
from cake_core.elab.builder import ProgramBuilder
from cake_core.elab.kernel_builder import KernelBuilder
from cake_core.ir.kernel import Op, Value
from cake_core.ir.symbolic import Const, Var
from cake_core.ir.types import IntType
from cake_core.primitives.registry import builtin_registry
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_core.syntax.parser import parse

HEADER, _, GEMM = GEMM_SM90_BLOCK.read_text(encoding="utf-8").partition("# --- kernel ---\n")
"""The constants and dims; a warp-specialised sm_90a GEMM kernel, `gemm`, checking clean."""


def gemm(name: str) -> str:
    return "\n" + GEMM.replace("def gemm(", f"def {name}(")


def in_kernel(text: str, name: str, line: int) -> bool:
    start = text.index(f"def {name}(")
    return text.count("\n", 0, start) - 1 <= line  # from its decorator on


# --- a kernel retracts only its own echoes ------------------------------------------------
def test_an_undeclared_pipeline_role_keeps_another_kernels_role_findings() -> None:
    # kernel a: a producer operation in the consumer role, on its pipeline `ab`
    a = gemm("a").replace("s = ab.wait()", "s = ab.acquire()", 1)
    # kernel b: its own pipeline `ab` names a role it does not declare
    b = gemm("b").replace('producer="load"', 'producer="loader"')
    alone = check_text(HEADER + a, "ab.cake").diagnostics
    text = HEADER + a + b
    both = check_text(text, "ab.cake").diagnostics
    first = [d for d in both if not in_kernel(text, "b", d.span.start.line)]
    assert [d.code for d in alone] == [codes.BAD_ROLE.code]
    assert first == alone  # kernel b did not retract kernel a's finding
    second = [d for d in both if in_kernel(text, "b", d.span.start.line)]
    # ... but b's own role checks against the missing role are still folded into one
    assert [d.code for d in second] == [codes.BAD_ROLE.code]
    assert "names role 'loader'" in second[0].message


def test_the_order_of_kernels_does_not_change_their_findings() -> None:
    a = gemm("a").replace("s = ab.wait()", "s = ab.acquire()", 1)
    b = gemm("b").replace('producer="load"', 'producer="loader"')
    forward = check_text(HEADER + a + b, "x.cake").diagnostics
    backward = check_text(HEADER + b + a, "x.cake").diagnostics
    assert sorted(d.message for d in forward) == sorted(d.message for d in backward)
    assert len(forward) == 2


# --- a global is never renamed --------------------------------------------------------------
def test_a_global_named_like_a_temporary_keeps_its_name() -> None:
    text = HEADER + "_t1 = 4\n" + gemm("a").replace(
        "    sa = smem(", "    y = _t1\n    sa = smem(") + gemm("b").replace(
        "    sa = smem(", "    z = _t1 + 1\n    sa = smem(")
    r = check_text(text, "g.cake")
    assert r.diagnostics == []
    assert r.program is not None
    g = r.program.constants["_t1"]
    assert g.name == "_t1"
    a, b = r.program.kernels
    assert a.values["y"].name == "y" and a.values["y"] is not g
    assert a.values["y"].sym == Const(4) and b.values["z"].sym == Const(5)


def test_an_unnamed_op_result_is_still_named_by_its_binding() -> None:
    # the tuple's elements are op results without names of their own until bound
    text = HEADER + gemm("a").replace(
        "        store(C.tile", "        neg, _t7 = (-acc, -acc)\n        cp = neg\n"
        "        store(C.tile")
    r = check_text(text, "n.cake")
    assert r.program is not None
    k = r.program.kernels[0]
    names = [res.name for op in k.ops() if isinstance(op, Op) and op.prim.name == "neg"
             for res in op.results]
    assert names == ["neg", "_t7"]  # named in place by the tuple binding
    assert k.values["cp"] is not k.values["neg"]  # a named value is copied, not renamed
    assert k.values["neg"].name == "neg"


# --- warpgroup.id covers a last, partial warpgroup ---------------------------------------
def warpgroup_var(warps: int) -> Var:
    text = HEADER + f"""
@kernel(arch="sm_90a", grid=(1,), warps={warps})
def k(C: Tensor[f32, (M, N)]):
    wg = warpgroup.id
    wid = warp.id
"""
    r = check_text(text, "w.cake")
    assert r.program is not None
    sym = r.program.kernels[0].values["wg"].sym
    assert isinstance(sym, Var) and sym.name == "warpgroup.id"
    return sym


def test_warpgroup_id_ranges_over_every_warpgroup_that_has_a_warp() -> None:
    for warps, groups in ((1, 1), (4, 1), (5, 2), (6, 2), (8, 2), (12, 3), (13, 4)):
        v = warpgroup_var(warps)
        assert (v.lo, v.hi) == (Const(0), Const(groups)), warps


# --- use tracking holds the values it saw ---------------------------------------------------
def kernel_builder() -> KernelBuilder:
    source = SourceFile(HEADER + gemm("a"), "u.cake")
    module = parse(source).module
    fn = next(s for s in module.body if isinstance(s, ast.FunctionDef))
    return KernelBuilder(ProgramBuilder(source, builtin_registry(), None), fn)


def test_a_dead_used_value_does_not_mark_a_new_one_as_used() -> None:
    kb = kernel_builder()
    span = kb.fn.span
    try:
        for i in range(50):
            kb.note_use(Value(f"dead{i}", IntType(), span))  # dropped at once
        fresh = [Value(f"new{i}", IntType(), span) for i in range(2000)]
        assert not [v for v in fresh if id(v) in kb.used]
    finally:
        kb.release()


def test_unused_buffers_are_reported_in_every_kernel_of_a_long_file() -> None:
    body = gemm("NAME").replace(
        "    ab = pipeline(", "    spare = smem(f32, (BM, BN))\n    ab = pipeline(")
    n = 40
    text = HEADER + "".join(body.replace("def NAME(", f"def k{i}(") for i in range(n))
    found = [d for d in check_text(text, "many.cake").diagnostics
             if d.code == codes.UNUSED_VALUE.code]
    assert len(found) == n
    assert all("`spare`" in d.message for d in found)
