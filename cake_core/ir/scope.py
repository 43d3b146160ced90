"""Names every kernel can use without defining them, and value constructors.

Built-in names are data (dtypes, layouts, index spaces); the builder consults this table
after the kernel's own scope and the file's top-level constants.
"""

from __future__ import annotations

import math

from cake_core.ir.kernel import Value
from cake_core.ir.symbolic import SymExpr
from cake_core.ir.types import (
    DTYPE_NAMES,
    DType,
    DTypeType,
    FragLayout,
    IndexSpaceType,
    IntType,
    LayoutType,
    NoneType,
    ScalarType,
    SmemLayout,
    StrType,
    Type,
)
from cake_core.syntax.source import Span

#: Index spaces and the attributes they offer (all runtime ints).
INDEX_SPACES: dict[str, tuple[str, ...]] = {
    "block": ("x", "y", "z"),
    "cluster": ("x", "y", "z", "rank"),
    "warp": ("id", "rank"),
    "warpgroup": ("id", "rank"),
    "lane": ("id",),
    "thread": ("id",),
}

SMEM_LAYOUT_NAMES: dict[str, SmemLayout] = {
    "row_major": SmemLayout("row"),
    "col_major": SmemLayout("col"),
}

FRAG_LAYOUT_NAMES: dict[str, FragLayout] = {f.value: f for f in FragLayout}

#: Functions the builder itself evaluates (they make types, not ops).
BUILDER_FUNCTIONS = ("dim", "cdiv", "min", "max", "range", "role", "kernel", "swizzle",
                     "padded", "Tensor")

FLOAT_CONSTANTS = {"inf": math.inf, "nan": math.nan, "pi": math.pi}


def int_value(sym: SymExpr, span: Span, name: str = "") -> Value:
    return Value(name or str(sym), IntType(), span, sym=sym)


def const_value(ty: Type, const: object, span: Span, name: str = "") -> Value:
    return Value(name or repr(const), ty, span, const=const)


def none_value(span: Span) -> Value:
    return Value("None", NoneType(), span)


def str_value(s: str, span: Span) -> Value:
    return Value(repr(s), StrType(), span, const=s)


def float_value(x: float, span: Span, dtype: DType = DType.F32) -> Value:
    return Value(repr(x), ScalarType(dtype), span, const=float(x))


def builtin(name: str, span: Span) -> Value | None:
    """The value of a built-in name, or None if `name` is not built in."""
    if name in DTYPE_NAMES:
        return const_value(DTypeType(), DTYPE_NAMES[name], span, name)
    if name in SMEM_LAYOUT_NAMES:
        return const_value(LayoutType(), SMEM_LAYOUT_NAMES[name], span, name)
    if name in FRAG_LAYOUT_NAMES:
        return const_value(LayoutType(), FRAG_LAYOUT_NAMES[name], span, name)
    if name in INDEX_SPACES:
        return Value(name, IndexSpaceType(name, INDEX_SPACES[name]), span)
    if name in FLOAT_CONSTANTS:
        return float_value(FLOAT_CONSTANTS[name], span)
    if name == "None":
        return none_value(span)
    return None


def builtin_names() -> list[str]:
    return sorted({*DTYPE_NAMES, *SMEM_LAYOUT_NAMES, *FRAG_LAYOUT_NAMES, *INDEX_SPACES,
                   *FLOAT_CONSTANTS, *BUILDER_FUNCTIONS})
