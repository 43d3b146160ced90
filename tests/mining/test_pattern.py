"""IR shapes: the same construct matches whatever its names, constants and layout on the
page; a different construct does not."""

from __future__ import annotations

from mining_support import BAD, IR_SHAPE, SEED, bad_line, variant

from cake_agents.mining.pattern import ShapeIndex, find_matches, shapes_at_line
from cake_core.check import check_text
from cake_core.ir.kernel import Kernel

BAD_SHAPE = IR_SHAPE


def _kernel(text: str) -> Kernel:
    res = check_text(text, "k.cake")
    assert res.program is not None and not res.errors, res.diagnostics
    return res.program.kernels[0]


def test_the_failing_line_has_the_shape_of_the_mistake() -> None:
    k = _kernel(BAD)
    assert shapes_at_line(k, bad_line(BAD)) == [BAD_SHAPE]


def test_names_constants_and_layout_do_not_change_the_shape() -> None:
    renamed = variant(7).replace("WM, 16", "WM, 8 * 2").replace("BK // 16) + k7",
                                                                 "BK // (8 * 2)) + k7")
    split = renamed.replace("+ k7)))", "+\n" + " " * 36 + "k7)))")
    assert renamed != variant(7) and split != renamed
    for text in (variant(3), renamed, split):
        assert [op.name for op in find_matches(_kernel(text), [BAD_SHAPE])] == ["ldmatrix"]


def test_the_correct_kernel_does_not_match() -> None:
    k = _kernel(SEED)
    assert list(find_matches(k, [BAD_SHAPE])) == []
    shapes = {ShapeIndex(k).shape(op) for op in k.ops()}
    assert BAD_SHAPE.replace("(_ * N) + _", "_") in shapes


def test_kinds_stand_for_values_defined_elsewhere() -> None:
    k = _kernel(SEED)
    mma = next(op for op in k.ops() if op.name == "mma_sync")
    assert ShapeIndex(k).shape(mma) == "mma_sync(acc=fragment, a=fragment, b=fragment)"
    b_line = next(i for i, ln in enumerate(SEED.splitlines()) if "b = ldmatrix" in ln)
    (shape,) = shapes_at_line(k, b_line)
    assert shape.endswith(".T)") and "coords=(_, _)" in shape
