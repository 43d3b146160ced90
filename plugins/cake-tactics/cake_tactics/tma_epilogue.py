"""tma-store-epilogue: write a wgmma accumulator out through shared memory and TMA.

The form it rewrites is the per-thread epilogue of a Hopper GEMM, one statement in a role:

    store(C.tile((BM, BN), (x, y)), cast(acc, bf16))

Every thread then stores its pairs of 16-bit elements straight to global memory: 4-byte
stores scattered over 8 rows per warp instruction.  The rewrite stages the tile in
(BM, EN) sub-tiles instead (EN the widest of 64, 32, 16 elements that divides BN, one
swizzle atom per row) and lets one thread move each with a TMA store:

    for j in range(BN // EN):
        stmatrix(sc[j % 2], cast(acc, bf16), j)     # each warp its rows, 16x16 blocks
        fence_proxy_async()                         # every writer, before the barrier
        barrier_sync(b1, W)
        tma_store(C.tile((BM, EN), (x, y * (BN // EN) + j)), sc[j % 2])
        tma_store_wait(1)                           # the store of j - 1 has read its buffer
        barrier_sync(b2, W)                         # ... which every warp now knows
    tma_store_wait(0)

with two sub-tile buffers, or one (`tma_store_wait(0)`) when two do not fit in shared
memory.  The named barriers take ids the kernel does not use.  The rewrite is offered only
when it verifies (resources, the fence and bulk-store rules) and the simulator, on a small
shape with the same random inputs, writes exactly what the original writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from cake_core.diagnostics.model import TextEdit, apply_edits
from cake_core.ir.kernel import Kernel, Op
from cake_core.ir.types import FragLayout, FragmentType, TileType, const_shape
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_tactics.kernel_text import (
    fresh_name,
    indent_of,
    names_in_text,
    operand,
    split_top_level,
)

PROV = Provenance("hand-written", "2026-12-04", ("examples/gemm_sm90.cake",))
_STORE = re.compile(r"^store\(\s*(\w+)\.tile\(\s*\((.*)\)\s*,\s*\((.*)\)\s*\)\s*,\s*"
                    r"cast\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\)\s*(#.*)?$")


@dataclass
class _Form:
    op: Op
    line: int
    tensor: str
    shape: tuple[str, str]
    coords: tuple[str, str]
    acc: str
    dtype: str
    rows: int
    cols: int
    warps: int
    role_line: int


def _role_warps(kernel: Kernel, op: Op) -> int | None:
    role = kernel.roles.get(op.role) if op.role else None
    if role is None:
        return None
    if role.warp_start % 4 or role.warps % 4:
        return None  # stmatrix is per warp, but the accumulator is per warpgroup
    return role.warps


def _match(kernel: Kernel, source: SourceFile, op: Op) -> _Form | None:
    if op.name != "store" or kernel.arch != "sm_90a":
        return None
    dst, src = op.args["dst"].type, op.args["src"].type
    if not isinstance(dst, TileType) or not isinstance(src, FragmentType):
        return None
    shape = const_shape(dst.shape)
    if shape is None or len(shape) != 2 or dst.dtype.bits != 16 or len(dst.tensor_shape) != 2:
        return None
    line = op.span.start.line
    if op.span.end.line != line:
        return None
    m = _STORE.match(source.line_text(line).strip())
    if m is None:
        return None
    dims, coords = split_top_level(m.group(2)), split_top_level(m.group(3))
    if len(dims) != 2 or len(coords) != 2:
        return None
    acc_v = next((v for n in kernel.walk() if isinstance(n, Op) and n.name == "cast"
                  and n.results and n.results[0] is op.args["src"]
                  for v in (n.args["x"],)), None)
    if acc_v is None or not isinstance(acc_v.type, FragmentType) or \
            acc_v.type.layout is not FragLayout.WGMMA_ACC or src.layout is not FragLayout.WGMMA_ACC:
        return None
    warps = _role_warps(kernel, op)
    role = kernel.roles.get(op.role) if op.role else None
    if warps is None or role is None:
        return None
    return _Form(op, line, m.group(1), (dims[0].strip(), dims[1].strip()),
                 (coords[0].strip(), coords[1].strip()), m.group(4), m.group(5),
                 shape[0], shape[1], warps, role.span.start.line)


def _find(kernel: Kernel, source: SourceFile) -> _Form | None:
    for n in kernel.walk():
        if isinstance(n, Op):
            f = _match(kernel, source, n)
            if f is not None:
                return f
    return None


def _used_barrier_ids(kernel: Kernel) -> set[int]:
    out = set()
    for n in kernel.walk():
        if isinstance(n, Op) and n.name in ("barrier_sync", "barrier_arrive"):
            v = n.args.get("id")
            c = v.sym.const if v is not None and v.sym is not None else None
            if c is not None:
                out.add(c)
    return out


def _widths(f: _Form) -> list[int]:
    return [w for w in (64, 32, 16) if f.cols % w == 0 and f.cols >= w]


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    f = _find(kernel, source)
    if f is None or not _widths(f):
        return None
    return (f"line {f.line + 1} stores the wgmma accumulator `{f.acc}` to global memory "
            "thread by thread; stmatrix into shared memory and one TMA store per sub-tile "
            "write it in whole lines")


def _variants(kernel: Kernel, source: SourceFile) -> list[dict[str, Any]]:
    f = _find(kernel, source)
    if f is None:
        return []
    return [{"width": w, "buffers": b} for w in _widths(f) for b in (2, 1)]




def _edits(kernel: Kernel, source: SourceFile, f: _Form, width: int, buffers: int
           ) -> tuple[TextEdit, ...] | None:
    free = [i for i in range(1, 16) if i not in _used_barrier_ids(kernel)]
    if len(free) < 2:
        return None
    b1, b2 = free[:2]
    taken = names_in_text(source.text)
    sc = fresh_name(taken, "sc", "sc_epi")
    j = fresh_name(taken | {sc}, "j", "jj", "part")
    parts = f.cols // width
    swz = width * 2  # 16-bit elements: one row of the sub-tile is one swizzle atom
    buf = f"{sc}[{j} % {buffers}]" if buffers > 1 else sc
    shape = f"({buffers}, {f.shape[0]}, {width})" if buffers > 1 else f"({f.shape[0]}, {width})"
    # the buffer: before the role that stores (a kernel-level statement, like the others)
    role_indent = indent_of(source.line_text(f.role_line))
    decl = (f"{role_indent}{sc} = smem({f.dtype}, {shape}, layout=swizzle({swz}))"
            f"  # epilogue sub-tile{'s' if buffers > 1 else ''}\n")
    ind = indent_of(source.line_text(f.line))
    wait = (f"tma_store_wait({buffers - 1})  # the store that last read {buf} is done\n")
    body = (f"stmatrix({buf}, cast({f.acc}, {f.dtype}), {j})\n"
            f"fence_proxy_async()\n"
            f"barrier_sync({b1}, {f.warps})\n"
            f"tma_store({f.tensor}.tile(({f.shape[0]}, {width}), ({f.coords[0]}, "
            f"{operand(f.coords[1])} * {parts} + {j})), {buf})\n"
            + wait +
            f"barrier_sync({b2}, {f.warps})  # ... and every warp knows it\n")
    text = (f"{ind}# epilogue: ({f.rows}, {width}) sub-tiles through shared memory, one TMA "
            f"store each\n"
            f"{ind}for {j} in range({parts}):\n"
            + "".join(f"{ind}    {ln}\n" for ln in body.splitlines())
            + f"{ind}tma_store_wait(0)")
    line_start = source.offset_of(f.line, 0)
    line_end = line_start + len(source.line_text(f.line).encode())
    role_start = source.offset_of(f.role_line, 0)
    return (TextEdit(source.span(role_start, role_start), decl),
            TextEdit(source.span(line_start, line_end), text))


def _same_on_small_shapes(kernel: Kernel, before: str, after: str, path: str) -> bool:
    """The simulator runs both kernels with the same random inputs: the rewrite must raise
    no finding and write exactly the original's outputs (the cast is the same)."""
    from cake_core.sim import SimKernel, simulate
    from cake_core.sim.inputs import default_dims, random_inputs

    try:
        old = SimKernel.from_text(before, path, kernel.name)
        new = SimKernel.from_text(after, path, kernel.name)
        dims = default_dims(old, 200)  # two row blocks, ragged columns: the edges clip
        data = random_inputs(old, dims, seed=0)
        r0, r1 = simulate(old, dims, data), simulate(new, dims, data)
        return bool(r0.ok and r1.ok and not r1.diagnostics and r0.outputs and all(
            np.array_equal(r0.outputs[k], r1.outputs[k], equal_nan=True) for k in r0.outputs))
    except Exception:  # a kernel the simulator cannot run is not offered
        return False


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    f = _find(kernel, source)
    if f is None:
        return None
    width, buffers = params.get("width", 64), params.get("buffers", 2)
    if width not in _widths(f) or buffers not in (1, 2):
        return None
    edits = _edits(kernel, source, f, width, buffers)
    if edits is None:
        return None
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    after = apply_edits(source.text, edits)
    if not _same_on_small_shapes(kernel, source.text, after, source.path):
        return None
    return TacticResult(
        edits, f"store `{f.acc}` through {buffers} shared-memory sub-tile"
        f"{'s' if buffers > 1 else ''} of ({f.rows}, {width}): stmatrix, fence, barrier, "
        f"one TMA store per sub-tile (line {f.line + 1})",
        {"predicted": done[1]})


TMA_EPILOGUE = Tactic(
    "tma-store-epilogue",
    "Write a wgmma accumulator through shared memory: stmatrix into swizzled sub-tiles, "
    "one TMA store each, instead of per-thread global stores.",
    _applies, _apply, _variants, PROV)

__all__ = ["TMA_EPILOGUE"]
