"""Resource rules about what instructions accept: TMA boxes, wgmma operands, dtypes, vectors.

These are the limits ptxas or the driver enforce late or not at all: a TMA descriptor with
a bad box fails `cuTensorMapEncodeTiled` at run time, an fp8 wgmma on an N-major operand
fails to assemble, a 2-warpgroup consumer with a 64-row accumulator computes garbage for
half of its rows.  Each is found here on the typed IR, at the call that needs it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, Severity
from cake_core.hardware import ArchSpec, Feature
from cake_core.ir.kernel import Kernel, Op, Program, Role
from cake_core.ir.symbolic import Const, Dim, SymExpr, divides, mul
from cake_core.ir.types import DType, FragmentType, SmemType, TensorType, TileType, shape_str
from cake_core.primitives.traits import Trait
from cake_core.source import Span
from cake_core.verify.edits import SourceIndex, dim_multiple_edit
from cake_core.verify.views import ViewTracer

TMA_MAX_BOX = 256
TMA_ALIGN = 16
VECTOR_BYTES = 16
_FP8 = (DType.E4M3, DType.E5M2)


def check_kernel(k: Kernel, arch: ArchSpec, program: Program, index: SourceIndex,
                 tracer: ViewTracer) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    out.extend(_dtypes(k, arch))
    out.extend(_tma(k, program, index))
    out.extend(_wgmma(k, tracer))
    out.extend(_vectors(k))
    return out


# --- TMA boxes and global strides ------------------------------------------------------
def _tma(k: Kernel, program: Program, index: SourceIndex) -> Iterator[Diagnostic]:
    seen_box: set[tuple[str, tuple[int, ...]]] = set()
    seen_tensor: set[str] = set()
    seen_dims: set[str] = set()
    for op in k.ops():
        arg = op.prim.effects.global_tile
        if Trait.TMA_COPY not in op.prim.traits or arg is None:
            continue
        tile = op.args[arg].type
        if not isinstance(tile, TileType):
            continue
        box = tuple(d.const or 0 for d in tile.shape)
        span = op.arg_spans.get(arg, op.span)
        if (tile.tensor, box) not in seen_box:
            seen_box.add((tile.tensor, box))
            diag = _box(op, tile, box, span)
            if diag is not None:
                yield diag
        if tile.tensor not in seen_tensor:
            seen_tensor.add(tile.tensor)
            diag = _strides(op, tile, span, program, index)
            # one finding per undeclared dim, however many tensors share it
            key = str(diag.data.get("dim", tile.tensor)) if diag is not None else ""
            if diag is not None and key not in seen_dims:
                seen_dims.add(key)
                yield diag


def _box(op: Op, tile: TileType, box: tuple[int, ...], span: Span) -> Diagnostic | None:
    big = [d for d in box if d > TMA_MAX_BOX]
    if big:
        return codes.TMA_BOX_TOO_LARGE.at(
            span, f"{op.name} box {shape_str(tile.shape)} has an extent of {big[0]}; a TMA box "
            f"holds at most {TMA_MAX_BOX} elements per dimension",
            notes=["cuTensorMapEncodeTiled rejects the descriptor at run time; copy the tile "
                   "in pieces of at most 256 rows, e.g. two loads of half the tile"],
            data={"box": list(box)})
    inner = box[-1] * tile.dtype.bytes
    if inner % TMA_ALIGN:
        return codes.TMA_BOX_MISALIGNED.at(
            span, f"{op.name} box {shape_str(tile.shape)} of {tile.dtype.value} has "
            f"{inner}-byte rows; TMA needs the inner box dimension to be a multiple of "
            f"{TMA_ALIGN} bytes",
            notes=[f"make the last tile extent a multiple of {TMA_ALIGN // tile.dtype.bytes}"
                   f" {tile.dtype.value} elements"],
            data={"box": list(box), "inner_bytes": inner})
    return None


def _strides(op: Op, tile: TileType, span: Span, program: Program,
             index: SourceIndex) -> Diagnostic | None:
    """Every global stride (bytes between consecutive indices of a non-inner dimension)
    must be a multiple of 16 for `cuTensorMapEncodeTiled`."""
    shape = tile.tensor_shape
    esize = tile.dtype.bytes
    stride: SymExpr = Const(esize)
    for i in range(len(shape) - 1, 0, -1):
        stride = mul(stride, shape[i])
        if divides(stride, TMA_ALIGN):
            continue
        dim_name = tile.tensor
        what = "rows" if i == len(shape) - 1 else f"consecutive indices of dimension {i - 1}"
        where = f"{what} of `{tile.tensor}` {shape_str(shape)} are {stride} bytes apart"
        if stride.const is not None:
            return codes.TMA_STRIDE_ALIGNMENT.at(
                span, f"{op.name}: {where}, not a multiple of {TMA_ALIGN}; TMA cannot address "
                "this tensor", notes=["pad the tensor's rows to a multiple of 16 bytes"],
                data={"tensor": dim_name, "stride": stride.const})
        inner = shape[-1]
        fixes: list[Fix] = []
        notes = ["cuTensorMapEncodeTiled rejects global strides that are not multiples of "
                 "16 bytes; the kernel cannot know that unless the dim declares it"]
        if isinstance(inner, Dim) and i == len(shape) - 1:
            need = TMA_ALIGN // math.gcd(TMA_ALIGN, esize)
            multiple = math.lcm(inner.multiple_of, need)
            decl = index.dim_call(inner.name)
            edit = dim_multiple_edit(index, decl, multiple) if decl is not None else None
            if edit is not None:
                fixes.append(Fix(f"declare `{inner.name}` a multiple of {multiple}", (edit,),
                                 Applicability.UNSAFE))
            notes.append(f"declare dim(\"{inner.name}\", multiple_of={multiple}) if callers "
                         "guarantee it")
        return codes.TMA_STRIDE_ALIGNMENT.at(
            span, f"{op.name}: {where}, which is not known to be a multiple of {TMA_ALIGN}",
            severity=Severity.WARNING, notes=notes, fixes=fixes,
            data={"tensor": dim_name, "stride": str(stride),
                  "dim": inner.name if isinstance(inner, Dim) else dim_name})
    return None


# --- wgmma ------------------------------------------------------------------------------
def _role_warps(k: Kernel, op: Op) -> tuple[str, int, int, Role | None]:
    role = k.roles.get(op.role) if op.role else None
    if role is None:
        return "the kernel", 0, k.warps, None
    return f"role {role.name!r}", role.warp_start, role.warp_stop, role


def _wgmma(k: Kernel, tracer: ViewTracer) -> Iterator[Diagnostic]:
    seen: set[tuple[str | None, str]] = set()
    for op in k.ops():
        if Trait.WARPGROUP_MMA not in op.prim.traits:
            continue
        yield from _operand_major(op, tracer)
        acc = op.args["acc"].type
        if not isinstance(acc, FragmentType) or acc.shape[0].const is None:
            continue
        key = (op.role, op.args["acc"].name)
        if key in seen:
            continue
        seen.add(key)
        who, w0, w1, role = _role_warps(k, op)
        related = [Related(role.name_span, f"{who}: warps {w0}..{w1 - 1}")] if role else []
        rows = acc.shape[0].const
        if w0 % 4 or w1 % 4:
            yield codes.WGMMA_WARPGROUP_MISMATCH.at(
                op.arg_spans.get("acc", op.span),
                f"wgmma runs on whole warpgroups (4 aligned warps), but {who} has warps "
                f"{w0}..{w1 - 1}", related=related)
            continue
        groups = (w1 - w0) // 4
        # Each warpgroup owns rows / groups consecutive rows, issued as one m64 wgmma per
        # 64-row slab (two slabs: two m64 instructions per K step sharing the B operand,
        # PTX ISA 9.7.15: the M of one wgmma is 64, a warpgroup may issue several).  The
        # rows must split into whole slabs: 64 rows over two warpgroups do not.
        if not rows or rows % (64 * groups):
            yield codes.WGMMA_WARPGROUP_MISMATCH.at(
                op.arg_spans.get("acc", op.span),
                f"the accumulator has {rows} rows but {who} has {groups} warpgroup"
                f"{'s' if groups != 1 else ''}: each warpgroup owns whole 64-row slabs, so "
                f"acc needs a multiple of {64 * groups} rows",
                related=related,
                notes=[f"use a ({64 * groups}, N) accumulator, or give the role "
                       f"{rows // 64 * 4} warps" if rows % 64 == 0 else
                       "wgmma M is 64 rows per warpgroup"],
                data={"rows": rows, "warpgroups": groups})


def _operand_major(op: Op, tracer: ViewTracer) -> Iterator[Diagnostic]:
    """fp8 (and any non-16-bit) wgmma reads both smem operands K-major only."""
    for name in ("a", "b"):
        t = op.args[name].type
        if not isinstance(t, SmemType) or t.dtype.bits == 16:
            continue
        view = tracer.view(op, name)
        transposed = view.transposed if view is not None else \
            t.transposed != (t.layout.order == "col")
        k_major = not transposed if name == "a" else transposed
        if k_major:
            continue
        want = "(M, K) row-major" if name == "a" else "(N, K) row-major, passed as `x.T`"
        yield codes.WGMMA_OPERAND_MAJOR.at(
            op.arg_spans.get(name, op.span),
            f"wgmma reads {t.dtype.value} operands K-major only, but `{name}` has its "
            f"{'M' if name == 'a' else 'N'} dimension contiguous",
            notes=[f"store the operand {want}; only f16/bf16 wgmma can transpose in "
                   "shared memory"])


# --- dtypes per arch --------------------------------------------------------------------
def unsupported_dtype(dtype: DType, arch: ArchSpec) -> bool:
    if dtype in _FP8:
        return not arch.has(Feature.FP8) or dtype.value not in arch.dtypes
    if dtype == DType.BF16:
        return not arch.has(Feature.BF16)
    return False


def _dtypes(k: Kernel, arch: ArchSpec) -> Iterator[Diagnostic]:
    uses: dict[DType, list[Span]] = {}
    for p in k.params:
        t = p.value.type
        if isinstance(t, TensorType) and unsupported_dtype(t.dtype, arch):
            uses.setdefault(t.dtype, []).append(p.span)
    for op in k.ops():
        for name in ("dtype",):
            v = op.args.get(name)
            if v is not None and isinstance(v.const, DType) and unsupported_dtype(v.const, arch):
                uses.setdefault(v.const, []).append(op.arg_spans.get(name, op.span))
    for dtype, spans in uses.items():
        first = min(spans, key=lambda s: s.start.offset)
        more = len(spans) - 1
        yield codes.DTYPE_UNSUPPORTED.at(
            first, f"{arch.name} has no {dtype.value} support (its tensor-core and conversion "
            f"types are {', '.join(sorted(arch.dtypes))})",
            notes=[f"{dtype.value} needs sm_89 or newer (conversions) and sm_90a for wgmma"]
            + ([f"{more} more use{'s' if more > 1 else ''} of {dtype.value} in this kernel"]
               if more else []),
            data={"dtype": dtype.value, "uses": len(spans)})


# --- vector width of global loads and stores ------------------------------------------------
def _vectors(k: Kernel) -> Iterator[Diagnostic]:
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for op in k.ops():
        arg = op.prim.effects.global_tile
        if arg is None or Trait.TMA_COPY in op.prim.traits:
            continue  # a TMA box is checked whole by `_tma`
        tile = op.args[arg].type
        if not isinstance(tile, TileType):
            continue
        box = tuple(d.const or 0 for d in tile.shape)
        row = box[-1] * tile.dtype.bytes
        total = row * math.prod(box[:-1])
        if row % VECTOR_BYTES == 0 or total < VECTOR_BYTES or (tile.tensor, box) in seen:
            continue  # a tile smaller than one vector has nothing to widen
        seen.add((tile.tensor, box))
        width = math.gcd(row, VECTOR_BYTES)
        what = "cp.async copies" if op.prim.effects.async_group == "cp_async" else \
            "each thread moves"
        yield codes.NARROW_VECTOR_ACCESS.at(
            op.arg_spans.get(arg, op.span),
            f"rows of this {tile.dtype.value} tile are {row} bytes, not a multiple of 16: "
            f"{what} {width}-byte pieces instead of 128-bit vectors",
            notes=[f"a last tile extent that is a multiple of "
                   f"{VECTOR_BYTES // tile.dtype.bytes} allows 16-byte accesses"],
            data={"row_bytes": row, "access_bytes": width})
