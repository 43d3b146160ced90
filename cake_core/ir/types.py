"""The types of CAKE IR values.

Every value a kernel names has one of these types; the primitive registry's type rules
are written against them.  Shapes are tuples of `SymExpr` so a tile shape is a folded
constant while a tensor's extent can stay symbolic (`dim("M")`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from cake_core.ir.symbolic import SymExpr


class DType(StrEnum):
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    E4M3 = "e4m3"
    E5M2 = "e5m2"
    I32 = "i32"
    I8 = "i8"
    U32 = "u32"
    BOOL = "bool"

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F16, DType.BF16, DType.E4M3, DType.E5M2)

    @property
    def is_int(self) -> bool:
        return self in (DType.I32, DType.I8, DType.U32)

    @property
    def cuda(self) -> str:
        return _CUDA[self]


_BITS = {DType.F32: 32, DType.F16: 16, DType.BF16: 16, DType.E4M3: 8, DType.E5M2: 8,
         DType.I32: 32, DType.I8: 8, DType.U32: 32, DType.BOOL: 8}
_CUDA = {DType.F32: "float", DType.F16: "__half", DType.BF16: "__nv_bfloat16",
         DType.E4M3: "__nv_fp8_e4m3", DType.E5M2: "__nv_fp8_e5m2", DType.I32: "int",
         DType.I8: "int8_t", DType.U32: "uint32_t", DType.BOOL: "bool"}

#: Names a kernel may use for dtypes (the canonical names plus the common aliases).
DTYPE_NAMES: dict[str, DType] = {d.value: d for d in DType} | {
    "fp8_e4m3": DType.E4M3, "fp8_e5m2": DType.E5M2, "float32": DType.F32,
    "float16": DType.F16, "bfloat16": DType.BF16, "int32": DType.I32, "int8": DType.I8,
}

Shape = tuple[SymExpr, ...]


def shape_str(shape: Shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def const_shape(shape: Shape) -> tuple[int, ...] | None:
    vals = []
    for d in shape:
        c = d.const
        if c is None:
            return None
        vals.append(c)
    return tuple(vals)


def numel(shape: Shape) -> int | None:
    cs = const_shape(shape)
    if cs is None:
        return None
    n = 1
    for v in cs:
        n *= v
    return n


# --- layouts ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SmemLayout:
    """How a shared-memory tile is laid out in bytes.

    `order` is the logical order of the last two dims ("row": the last dim is
    contiguous).  `swizzle` is the XOR swizzle span in bytes (0, 32, 64 or 128) as TMA
    and wgmma understand it: 16-byte chunks inside each `swizzle`-byte row segment are
    permuted by the row index, which is what removes bank conflicts.  `pad` adds that
    many elements at the end of every row (the classic alternative to swizzling).
    """

    order: str = "row"
    swizzle: int = 0
    pad: int = 0

    def __str__(self) -> str:
        if self.swizzle:
            base = f"swizzle({self.swizzle}" + (", order=\"col\")" if self.order == "col" else ")")
            return base
        if self.pad:
            return f"padded({self.pad})"
        return "row_major" if self.order == "row" else "col_major"


ROW_MAJOR = SmemLayout()


class FragLayout(StrEnum):
    """Register layouts of fragments; they say which instruction owns the distribution."""

    ROWS = "rows"          # generic: each thread holds whole elements, any shape
    MMA_A = "mma_a"        # mma.sync A operand
    MMA_B = "mma_b"        # mma.sync B operand
    MMA_ACC = "mma_acc"    # mma.sync accumulator / D
    WGMMA_ACC = "wgmma_acc"  # wgmma accumulator (registers of a warpgroup)
    WGMMA_A = "wgmma_a"    # wgmma A operand from registers


# --- types -----------------------------------------------------------------------------
class Type:
    """Base class; `describe()` is what hovers and messages show."""

    __slots__ = ()

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, slots=True)
class ErrorType(Type):
    """The type of a value whose definition already produced a diagnostic.

    Type rules accept it silently, so one mistake yields one finding, not a cascade.
    """

    def describe(self) -> str:
        return "<error>"


@dataclass(frozen=True, slots=True)
class NoneType(Type):
    def describe(self) -> str:
        return "None"


@dataclass(frozen=True, slots=True)
class IntType(Type):
    """An integer: compile-time constant, launch-time dim expression or runtime index."""

    def describe(self) -> str:
        return "int"


@dataclass(frozen=True, slots=True)
class ScalarType(Type):
    """A scalar of a given dtype (a float literal, a kernel scalar parameter)."""

    dtype: DType

    def describe(self) -> str:
        return self.dtype.value


@dataclass(frozen=True, slots=True)
class StrType(Type):
    def describe(self) -> str:
        return "str"


@dataclass(frozen=True, slots=True)
class DTypeType(Type):
    def describe(self) -> str:
        return "dtype"


@dataclass(frozen=True, slots=True)
class LayoutType(Type):
    def describe(self) -> str:
        return "layout"


@dataclass(frozen=True, slots=True)
class RangeType(Type):
    def describe(self) -> str:
        return "range"


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    elts: tuple[Type, ...]

    def describe(self) -> str:
        return "(" + ", ".join(e.describe() for e in self.elts) + ")"


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    """A tensor in global memory (a kernel parameter)."""

    dtype: DType
    shape: Shape

    def describe(self) -> str:
        return f"Tensor[{self.dtype.value}, {shape_str(self.shape)}]"


@dataclass(frozen=True, slots=True)
class TileType(Type):
    """A tile of a global tensor: `A.tile((BM, BK), (block.x, k))`.

    Out-of-range parts of a tile are clipped on stores and zero-filled on loads, as TMA
    and cp.async with a source size do.  `limited`: the tile was given `limit=`, a bound
    inside the tensor that only register `load`/`store` can honour (TMA clips at the
    tensor map's edges only), so the copies that take a tile can refuse it (CK330).
    """

    dtype: DType
    shape: Shape
    tensor: str
    tensor_shape: Shape
    limited: bool = False
    shifted: bool = False
    """Placed with `offset=`: its origin is `coords * shape + offset` elements (hovers)."""

    def describe(self) -> str:
        where = (" at an element offset" if self.shifted else "") + \
            (", clipped at its limit" if self.limited else "")
        return f"Tile[{self.dtype.value}, {shape_str(self.shape)}] of {self.tensor}{where}"


@dataclass(frozen=True, slots=True)
class SmemType(Type):
    """A shared-memory buffer or a view of one.

    `buffer` names the allocation; `shape` is the logical shape of this view; a view
    made by indexing a leading (stage) dimension keeps `buffer_shape` and records the
    stage in the op that made it.  `transposed` views swap the last two dims logically
    without moving data (`sb[s].T`).
    """

    dtype: DType
    shape: Shape
    layout: SmemLayout
    buffer: str
    buffer_shape: Shape
    transposed: bool = False

    @property
    def is_view(self) -> bool:
        return self.shape != self.buffer_shape or self.transposed

    def describe(self) -> str:
        t = ".T" if self.transposed else ""
        kind = "smem view" if self.is_view else "smem"
        return f"{kind}[{self.dtype.value}, {shape_str(self.shape)}, {self.layout}]{t}"


@dataclass(frozen=True, slots=True)
class FragmentType(Type):
    """Values in registers, distributed over the threads of the executing warps."""

    dtype: DType
    shape: Shape
    layout: FragLayout = FragLayout.ROWS

    def describe(self) -> str:
        return f"fragment[{self.dtype.value}, {shape_str(self.shape)}, {self.layout.value}]"


@dataclass(frozen=True, slots=True)
class PipelineType(Type):
    """A ring of `stages` buffers slots guarded by full/empty mbarrier pairs it owns."""

    name: str
    stages: int
    producer: str
    consumers: tuple[str, ...]

    def describe(self) -> str:
        cons = ", ".join(self.consumers)
        return f"pipeline[{self.stages} stages, {self.producer} -> {cons}]"


@dataclass(frozen=True, slots=True)
class StageType(Type):
    """A pipeline stage index returned by acquire()/wait(); an int in [0, stages)."""

    pipeline: str
    stages: int
    side: str  # "producer" or "consumer"

    def describe(self) -> str:
        return f"stage of {self.pipeline} ({self.side})"


@dataclass(frozen=True, slots=True)
class BarrierType(Type):
    """Raw mbarrier(s) in shared memory, initialised with an arrival count."""

    name: str
    count: int
    n: int = 1
    indexed: bool = False

    def describe(self) -> str:
        arr = f" x{self.n}" if self.n > 1 and not self.indexed else ""
        return f"mbarrier[count={self.count}]{arr}"


@dataclass(frozen=True, slots=True)
class RoleType(Type):
    name: str

    def describe(self) -> str:
        return f"role {self.name!r}"


@dataclass(frozen=True, slots=True)
class IndexSpaceType(Type):
    """`block`, `warp`, `lane`, `thread`, `cluster`: objects whose attributes are indices."""

    name: str
    attrs: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        return self.name

