"""What a lower facet sees: the kernel being lowered and how its values are spelled in C++.

Facets are `facet(op, ctx) -> str`: they return the code of one op (ideally one line) and
use the context to name things: integer expressions, fragments and their layouts, shared
memory addresses (with the buffer's swizzle), global tiles, tensor maps, pipelines and
barriers.  The context also records which helper groups and wgmma shapes the code uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cake_core.hardware import ArchSpec
from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Kernel, Op, Value
from cake_core.ir.symbolic import BinExpr, Const, Dim, SymExpr, Var
from cake_core.ir.types import (
    BarrierType,
    DType,
    FragmentType,
    IntType,
    PipelineType,
    ScalarType,
    StageType,
    TileType,
    const_shape,
)
from cake_core.ir.values import Predicate, ViewOrigin, elements
from cake_core.lower.emitter import Names
from cake_core.lower.layouts import Dist
from cake_core.lower.plan import Group, KernelPlan, LowerError, SlotKey
from cake_core.verify.smem_plan import SmemPlan
from cake_core.verify.views import Geometry, View, ViewTracer

#: Identifiers every kernel declares; user names that collide get a trailing underscore.
FIXED_NAMES = frozenset({"smem", "smem_u32", "warp_id", "lane", "warp_rank", "wg_rank",
                         "thread_rank", "leader"})

INDEX_NAMES = {
    "block.x": "int(blockIdx.x)", "block.y": "int(blockIdx.y)", "block.z": "int(blockIdx.z)",
    "warp.id": "warp_id", "warp.rank": "warp_rank", "warpgroup.id": "(warp_id / 4)",
    "warpgroup.rank": "wg_rank", "lane.id": "lane", "thread.id": "int(threadIdx.x)",
    "cluster.x": "cake_cluster_ctaid(0)", "cluster.y": "cake_cluster_ctaid(1)",
    "cluster.z": "cake_cluster_ctaid(2)", "cluster.rank": "cake_cluster_rank()",
}

CTYPE = {DType.F32: "float", DType.F16: "__half", DType.BF16: "__nv_bfloat16",
         DType.E4M3: "__nv_fp8_e4m3", DType.E5M2: "__nv_fp8_e5m2", DType.I32: "int",
         DType.I8: "int8_t", DType.U32: "uint32_t", DType.BOOL: "bool"}

TMAP_DTYPE = {DType.F32: "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
              DType.F16: "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
              DType.BF16: "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
              DType.I32: "CU_TENSOR_MAP_DATA_TYPE_INT32",
              DType.U32: "CU_TENSOR_MAP_DATA_TYPE_UINT32",
              DType.E4M3: "CU_TENSOR_MAP_DATA_TYPE_UINT8",
              DType.E5M2: "CU_TENSOR_MAP_DATA_TYPE_UINT8",
              DType.I8: "CU_TENSOR_MAP_DATA_TYPE_UINT8",
              DType.BOOL: "CU_TENSOR_MAP_DATA_TYPE_UINT8"}

_PREC = {"+": 6, "-": 6, "*": 7, "//": 7, "%": 7}


@dataclass
class TensorInfo:
    name: str
    cname: str
    dtype: DType
    shape: tuple[SymExpr, ...]
    written: bool = False


@dataclass
class TmapSpec:
    """A CUtensorMap the launcher encodes: the tensor, its box (innermost first), swizzle."""

    cname: str
    tensor: str
    dtype: DType
    box: tuple[int, ...]
    swizzle: int

    @property
    def rank(self) -> int:
        return len(self.box)


@dataclass(frozen=True)
class TileRef:
    """A global tile: origin[d] = coords[d] * shape[d] + offset[d] (elements), clipped at
    the tensor's extent and, where given, at `limit[d]` (exclusive)."""

    tensor: TensorInfo
    shape: tuple[int, ...]
    coords: tuple[SymExpr, ...]
    offset: tuple[SymExpr, ...] | None = None
    limit: tuple[SymExpr, ...] | None = None

    def origin(self, d: int) -> SymExpr:
        start = S.mul(self.coords[d], Const(self.shape[d]))
        return start if self.offset is None else S.add(start, self.offset[d])


@dataclass(frozen=True)
class FragVar:
    cname: str
    dtype: DType
    shape: tuple[int, ...]
    dist: Dist

    @property
    def ctype(self) -> str:
        return "uint32_t" if self.dist.opaque else CTYPE[self.dtype]

    @property
    def size(self) -> int:
        return self.dist.parent.registers if self.dist.opaque else self.dist.registers

    @property
    def decl(self) -> str:
        return f"{self.ctype} {self.cname}[{self.size}]"


@dataclass
class SmemRef:
    view: View
    geometry: Geometry
    offset_name: str

    @property
    def swizzle(self) -> int:
        return self.geometry.layout.swizzle


@dataclass
class LowerContext:
    kernel: Kernel
    arch: ArchSpec
    plan: KernelPlan
    smem: SmemPlan
    tracer: ViewTracer
    names: Names
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    dims: dict[str, str] = field(default_factory=dict)
    scalars: dict[str, str] = field(default_factory=dict)
    tmaps: list[TmapSpec] = field(default_factory=list)
    smem_names: dict[str, str] = field(default_factory=dict)
    """Allocation name -> its `SMEM_<NAME>_OFFSET` constant."""
    barrier_names: dict[str, str] = field(default_factory=dict)
    """Raw mbarrier name -> C++ variable with its shared address."""
    pipe_names: dict[str, dict[str, str]] = field(default_factory=dict)
    """Pipeline name -> {"full", "empty", "acquire", "commit", "wait", "release"} names."""
    features: set[str] = field(default_factory=set)
    wgmma_shapes: set[tuple[int, DType]] = field(default_factory=set)
    group: Group | None = None
    scopes: list[dict[object, object]] = field(default_factory=list)
    tiles: dict[object, TileRef] = field(default_factory=dict)
    wgmma_accs: list[FragVar] = field(default_factory=list)
    """Accumulators a wgmma of the current role writes (fenced after each wait)."""
    loop_names: dict[str, str] = field(default_factory=dict)
    elected: bool = False
    """Inside `elect_one()`: the code already runs in the role's thread 0 (the leader)."""

    # -- scopes -----------------------------------------------------------------------------
    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def lookup(self, key: object) -> object | None:
        for s in reversed(self.scopes):
            if key in s:
                return s[key]
        return None

    def declare(self, key: object, value: object) -> None:
        self.scopes[-1][key] = value

    def visible(self, value: object) -> bool:
        return any(value in s.values() for s in self.scopes)

    @property
    def g(self) -> Group:
        assert self.group is not None
        return self.group

    # -- integers ---------------------------------------------------------------------------
    def var(self, name: str) -> str:
        hit = self.lookup(("var", name))
        if isinstance(hit, str):
            return hit
        if name in INDEX_NAMES:
            if name.startswith("cluster."):
                self.features.add("cluster")
            return INDEX_NAMES[name]
        raise LowerError(self.kernel.span, f"`{name}` has no C++ spelling here (a name used "
                         "outside the block that binds it?)")

    def sym(self, e: SymExpr) -> str:
        return self._sym(e)[0]

    def _sym(self, e: SymExpr) -> tuple[str, int]:
        if isinstance(e, Const):
            return (str(e.value), 10) if e.value >= 0 else (f"({e.value})", 10)
        if isinstance(e, Dim):
            return self.dims[e.name], 10
        if isinstance(e, Var):
            return (e.name[1:], 10) if e.name.startswith("@") else (self.var(e.name), 10)
        assert isinstance(e, BinExpr)
        if e.op in ("cdiv", "min", "max"):
            fn = {"cdiv": "cake_cdiv", "min": "min", "max": "max"}[e.op]
            return f"{fn}({self.sym(e.left)}, {self.sym(e.right)})", 10
        p = _PREC[e.op]
        a, pa = self._sym(e.left)
        b, pb = self._sym(e.right)
        if pa < p:
            a = f"({a})"
        right_ok = pb > p or (pb == p and isinstance(e.right, BinExpr) and (
            (e.op == "+" and e.right.op in ("+", "-")) or (e.op == "*" and e.right.op == "*")))
        if not right_ok and pb <= p:
            b = f"({b})"
        op = "/" if e.op == "//" else e.op
        return f"{a} {op} {b}", p

    def int_value(self, v: Value) -> str:
        if v.sym is not None:
            return self.sym(v.sym)
        if isinstance(v.type, StageType):
            return self.var(v.name)
        if isinstance(v.type, IntType) and v.const is None:
            return self.var(v.name)  # an op's runtime int (`load_scalar`), by its C name
        if isinstance(v.const, bool):
            return "true" if v.const else "false"
        raise LowerError(v.span, f"`{v.name}` is not an integer the lowering can spell")

    def cond(self, v: Value) -> str:
        """A run-time condition (`k + 1 < ktiles`, `warp.rank == 0 and ...`)."""
        c = v.const
        if isinstance(c, bool):
            return "true" if c else "false"
        if isinstance(c, Predicate):
            if c.op == "not":
                return f"!({self.cond(c.conditions[0])})"
            if c.op in ("and", "or"):
                j = " && " if c.op == "and" else " || "
                return j.join(f"({self.cond(x)})" for x in c.conditions)
            ops, vals = c.chain
            parts = [self._operand(x) for x in vals]
            return " && ".join(f"{a} {o} {b}" for o, a, b in
                               zip(ops, parts, parts[1:], strict=False))
        if v.sym is not None:
            return f"{self.sym(v.sym)} != 0"
        raise LowerError(v.span, "this condition has no C++ spelling")

    def _operand(self, x: object) -> str:
        if isinstance(x, SymExpr):
            return self.sym(x)
        assert isinstance(x, Value)
        if isinstance(x.type, ScalarType):
            return self.scalar(x)
        return self.int_value(x)

    def scalar(self, v: Value) -> str:
        """A scalar operand: a float literal, a scalar parameter or an int expression."""
        if isinstance(v.type, IntType):
            return self.int_value(v)
        if isinstance(v.const, bool):
            return "true" if v.const else "false"
        if isinstance(v.const, float):
            return float_literal(v.const)
        if v.name in self.scalars:
            return self.scalars[v.name]
        raise LowerError(v.span, f"the scalar `{v.name}` has no C++ spelling")

    # -- fragments --------------------------------------------------------------------------
    def frag(self, op: Op, arg: str) -> FragVar:
        return self.frag_value(op.args[arg], op)

    def frag_value(self, v: Value, op: Op) -> FragVar:
        hit = self.lookup(("frag", id(v)))
        if isinstance(hit, FragVar):
            return hit
        key = self.plan.arg_key(op.role, v)
        hit = self.lookup(key)
        if isinstance(hit, FragVar):
            return hit
        raise LowerError(op.arg_spans.get(next((k for k, x in op.args.items() if x is v), ""),
                                          op.span),
                         f"`{v.name}` is not visible here: the lowering found no fragment "
                         "bound to it in an enclosing block")

    def define(self, op: Op, index: int = 0) -> tuple[FragVar, str]:
        """The variable of result `index` and the declaration to put before its first write
        ("" when the name is already declared in an enclosing block)."""
        r = op.results[index]
        assert isinstance(r.type, FragmentType)
        key = self.plan.result_key(op, index)
        hit = self.lookup(key)
        if isinstance(hit, FragVar):
            self.declare(("frag", id(r)), hit)
            return hit, ""
        fv = self.frag_var(key, r.type)
        self.declare(key, fv)
        self.declare(("frag", id(r)), fv)
        return fv, fv.decl + "; "

    def frag_var(self, key: SlotKey, t: FragmentType) -> FragVar:
        dist = self.plan.dists.get(key)
        if dist is None:
            raise LowerError(self.kernel.span, f"no register layout for `{key[1]}`")
        shape = const_shape(t.shape)
        assert shape is not None
        return FragVar(self.plan.slot_names.get(key, key[1]), t.dtype, shape, dist)

    def loop_var(self, base: str) -> str:
        name = self.loop_names.get(base)
        if name is None:
            name = self.loop_names[base] = self.names.internal(base)
        return name

    # -- shared memory --------------------------------------------------------------------------
    def smem_ref(self, op: Op, arg: str) -> SmemRef:
        view = self.tracer.view(op, arg)
        if view is None:
            raise LowerError(op.arg_spans.get(arg, op.span),
                             "the lowering cannot place this shared-memory view")
        g = self.tracer.geometries[view.buffer]
        if g.col_order:
            raise LowerError(op.arg_spans.get(arg, op.span),
                             "column-major shared-memory buffers are not lowered yet")
        return SmemRef(view, g, self.smem_names[view.buffer])

    def smem_offset(self, ref: SmemRef, row: SymExpr, col: SymExpr, swizzled: bool = True) -> str:
        """Byte offset from the smem base of element (row, col) of the view."""
        g, v = ref.geometry, ref.view
        e = S.add(S.mul(S.add(v.row0, row), Const(g.pitch)),
                  S.mul(S.add(v.col0, col), Const(g.esize)))
        expr = add(ref.offset_name, self.linear(e))
        if swizzled and ref.swizzle:
            return f"cake_swizzle<{ref.swizzle}>({expr})"
        return expr

    def linear(self, e: SymExpr) -> str:
        """`e` as a sum of terms with folded coefficients: `s * 16384 + kk * 32`."""
        terms: dict[str, int] = {}
        const = 0

        def walk(x: SymExpr, k: int) -> None:
            nonlocal const
            if isinstance(x, Const):
                const += k * x.value
            elif isinstance(x, BinExpr) and x.op == "+":
                walk(x.left, k)
                walk(x.right, k)
            elif isinstance(x, BinExpr) and x.op == "-":
                walk(x.left, k)
                walk(x.right, -k)
            elif isinstance(x, BinExpr) and x.op == "*" and x.right.const is not None:
                walk(x.left, k * x.right.const)
            elif isinstance(x, BinExpr) and x.op == "*" and x.left.const is not None:
                walk(x.right, k * x.left.const)
            else:
                text, prec = self._sym(x)
                if prec < 7:
                    text = f"({text})"
                terms[text] = terms.get(text, 0) + k

        walk(e, 1)
        out = ""
        for text, k in terms.items():
            if k == 0:
                continue
            mag = text if abs(k) == 1 else f"{text} * {abs(k)}"
            out = mag if not out and k > 0 else (f"-{mag}" if not out else
                                                  f"{out} {'+' if k > 0 else '-'} {mag}")
        if const or not out:
            out = str(const) if not out else f"{out} {'+' if const > 0 else '-'} {abs(const)}"
        return out

    # -- global tiles -------------------------------------------------------------------------
    def note_tile(self, op: Op) -> None:
        t = op.results[0].type
        assert isinstance(t, TileType)
        tensor = self.tensors[op.args["self"].name]
        shape = const_shape(t.shape)
        coords = op.args["coords"]
        syms = tuple(_index_sym(e) for e in elements(coords))
        assert shape is not None
        ref = TileRef(tensor, shape, syms, _element_syms(op, "offset"),
                      _element_syms(op, "limit"))
        self.tiles[id(op.results[0])] = ref
        for name in self.plan.bindings.names_of(op):
            self.declare(("tile", name), ref)

    def tile(self, op: Op, arg: str) -> TileRef:
        v = op.args[arg]
        hit = self.tiles.get(id(v))
        if hit is None:
            found = self.lookup(("tile", v.name))
            hit = found if isinstance(found, TileRef) else None
        if hit is None:
            raise LowerError(op.arg_spans.get(arg, op.span),
                             f"the lowering cannot find the tile `{v.name}`")
        return hit

    def tile_origin(self, tile: TileRef, d: int) -> str:
        return self.linear(tile.origin(d))

    def global_index(self, tile: TileRef, local: list[SymExpr], named: bool = False
                     ) -> tuple[str, list[str], str, str]:
        """Indices of the element at `local` (coordinates in the tile's trailing dimensions).

        Returns the declarations of named indices ("" unless `named`), the per-dimension
        index expressions, the int64 linear offset into the tensor and the bounds check.
        """
        rank = len(tile.shape)
        full = [Const(0)] * (rank - len(local)) + list(local)
        idx = [self.linear(S.add(tile.origin(d), full[d])) for d in range(rank)]
        decls = ""
        if named:
            labels = ["row", "col"] if rank - len(local) <= rank - 2 and len(local) >= 2 else []
            parts = []
            for d in range(rank):
                if idx[d] == "0" or idx[d].isdigit() or idx[d].isidentifier():
                    continue
                label = labels[d - (rank - 2)] if labels and d >= rank - 2 else f"i{d}"
                name = self.loop_var("g" + label)
                parts.append(f"{name} = {idx[d]}")
                idx[d] = name
            decls = f"const int {', '.join(parts)}; " if parts else ""
        ext = [self.sym(e) for e in tile.tensor.shape]
        lin = f"int64_t({idx[0]})"
        for d in range(1, rank):
            lin = f"{lin if d == 1 else '(' + lin + ')'} * {paren(ext[d])} + {idx[d]}"
        checks = [f"{paren(i)} < {paren(e)}" for d, (i, e) in enumerate(zip(idx, ext, strict=True))
                  if i != "0" and not self._inside(tile, d)]
        if tile.limit is not None:  # the limit clips as the tensor's edge does
            checks += [f"{paren(i)} < {paren(self.linear(lim))}"
                       for i, lim in zip(idx, tile.limit, strict=True)]
        return decls, idx, lin, " && ".join(checks) or "true"

    @staticmethod
    def _inside(tile: TileRef, d: int) -> bool:
        """Whether every element of the tile along `d` is provably inside the tensor."""
        o, e = tile.origin(d).const, tile.tensor.shape[d].const
        return o is not None and e is not None and o >= 0 and o + tile.shape[d] <= e

    def tmap(self, tile: TileRef, swizzle: int) -> TmapSpec:
        box = tuple(reversed(tile.shape))
        for spec in self.tmaps:
            if spec.tensor == tile.tensor.name and spec.box == box and spec.swizzle == swizzle:
                return spec
        same = [s for s in self.tmaps if s.tensor == tile.tensor.name]
        base = f"tmap_{tile.tensor.cname}" + (f"_{len(same)}" if same else "")
        spec = TmapSpec(self.names.internal(base), tile.tensor.name, tile.tensor.dtype, box,
                        swizzle)
        self.tmaps.append(spec)
        return spec

    # -- barriers ------------------------------------------------------------------------------
    def pipe(self, v: Value) -> tuple[PipelineType, dict[str, str]]:
        t = v.type
        assert isinstance(t, PipelineType)
        return t, self.pipe_names[t.name]

    def barrier(self, v: Value) -> str:
        """The shared address of a raw mbarrier value (`bar` or `bars[i]`)."""
        t = v.type
        assert isinstance(t, BarrierType)
        base = self.barrier_names[t.name]
        if isinstance(v.const, ViewOrigin) and v.const.index:
            return add(base, mul(self.int_value(v.const.index[0]), 8))
        return base

    # -- who does what ---------------------------------------------------------------------------
    def leader(self, code: str) -> str:
        """`code` for one elected thread of the group."""
        if self.g.single or self.elected:
            return code
        return f"if (leader) {{ {code} }}" if ";" in code.rstrip(";") else f"if (leader) {code}"


# --- small string algebra (keeps generated index expressions free of `+ 0` and `* 1`) ------
def _is_simple(e: str) -> bool:
    """No top-level operator binds looser than `*` (so `e * k` needs no parentheses)."""
    depth = 0
    prev = ""
    for ch in e.strip():
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and (ch in "+?<>=&|^" or (ch == "-" and (prev.isalnum()
                                                              or prev in ")]_"))):
            return False
        if not ch.isspace():
            prev = ch
    return True


def paren(e: str) -> str:
    return e if _is_simple(e) else f"({e})"


def add(*terms: str) -> str:
    kept = [t for t in terms if t not in ("0", "", "(0)")]
    return " + ".join(kept) if kept else "0"


def mul(e: str, k: int | str) -> str:
    if e in ("0", "(0)") or k in (0, "0"):
        return "0"
    if k in (1, "1"):
        return e
    left = e if _is_simple(e) else f"({e})"
    return f"{left} * {k}"


def float_literal(x: float) -> str:
    if math.isinf(x):
        return "INFINITY" if x > 0 else "-INFINITY"
    if math.isnan(x):
        return "NAN"
    text = repr(float(x))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def _element_syms(op: Op, name: str) -> tuple[SymExpr, ...] | None:
    """A tile's `offset=` / `limit=` as index expressions (None when not given)."""
    v = op.given(name)
    return None if v is None else tuple(_index_sym(e) for e in elements(v))


def _index_sym(v: Value) -> SymExpr:
    if v.sym is not None:
        return v.sym
    return Var(v.name)


__all__ = ["CTYPE", "FIXED_NAMES", "FragVar", "LowerContext", "SmemRef", "TensorInfo",
           "TileRef", "TmapSpec", "add", "float_literal", "mul", "paren"]
