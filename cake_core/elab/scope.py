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
from cake_core.source import Span

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
                     "padded", "Tensor", "sm_count", "tile_coords")

FLOAT_CONSTANTS = {"inf": math.inf, "nan": math.nan, "pi": math.pi}


# Types without fields are immutable and all equal: one shared instance each saves
# building a new one for every literal and name (values are made by the thousand).
INT_TYPE = IntType()
_NONE = NoneType()
_STR = StrType()
_SCALARS = {d: ScalarType(d) for d in DType}
BOOL_TYPE = _SCALARS[DType.BOOL]


def int_value(sym: SymExpr, span: Span, name: str = "") -> Value:
    return Value(name or str(sym), INT_TYPE, span, sym)


def none_value(span: Span) -> Value:
    return Value("None", _NONE, span)


def str_value(s: str, span: Span) -> Value:
    return Value(repr(s), _STR, span, None, s)


def float_value(x: float, span: Span, dtype: DType = DType.F32) -> Value:
    return Value(repr(x), _SCALARS[dtype], span, None, float(x))


def _builtin_table() -> dict[str, tuple[str, Type, object]]:
    """Built-in name -> (value name, type, const).

    Filled lowest precedence first, so a name in two tables means what it always meant:
    dtypes, then shared-memory layouts, fragment layouts, index spaces, float constants.
    """
    table: dict[str, tuple[str, Type, object]] = {"None": ("None", _NONE, None)}
    for name, x in FLOAT_CONSTANTS.items():
        table[name] = (repr(x), _SCALARS[DType.F32], float(x))
    for name, attrs in INDEX_SPACES.items():
        table[name] = (name, IndexSpaceType(name, attrs), None)
    layout = LayoutType()
    for name, frag in FRAG_LAYOUT_NAMES.items():
        table[name] = (name, layout, frag)
    for name, smem in SMEM_LAYOUT_NAMES.items():
        table[name] = (name, layout, smem)
    dtype = DTypeType()
    for name, d in DTYPE_NAMES.items():
        table[name] = (name, dtype, d)
    return table


_BUILTINS = _builtin_table()


def builtin(name: str, span: Span) -> Value | None:
    """The value of a built-in name, or None if `name` is not built in."""
    entry = _BUILTINS.get(name)
    if entry is None:
        return None
    value_name, ty, const = entry
    return Value(value_name, ty, span, None, const)


def builtin_names() -> list[str]:
    return sorted({*DTYPE_NAMES, *SMEM_LAYOUT_NAMES, *FRAG_LAYOUT_NAMES, *INDEX_SPACES,
                   *FLOAT_CONSTANTS, *BUILDER_FUNCTIONS})
