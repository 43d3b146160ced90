"""`persistent-tiles`: one block per SM, each looping over output tiles.

A kernel whose grid is one block per output tile launches `ntiles` blocks in waves; the
last wave leaves SMs idle, and every block pays its prologue (pipeline fill, barrier
init).  The persistent form launches `min(sm_count(), ntiles)` blocks -- one per SM of
the device it runs on, which the launcher asks the driver for; no SM count is written
into the text -- and each runs

    for tile_id in range(block.x, ntiles, sm_count()):
        tile_x, tile_y = tile_coords(tile_id, GX, GY, group=8, raster="m")
        ... the old body, with block.x / block.y replaced by tile_x / tile_y ...

in every role (CK326 holds: the step is the grid when there are more tiles than SMs, and
each block's loop runs once when there are fewer).  `tile_coords` walks the tiles in
bands of `group` tiles along the fast axis, so the blocks working at one time share their
input panels in L2; a 1-D grid walks its tiles in order, a 3-D one x fastest.  A pipeline
keeps running across tiles: the producer starts on the next tile's copies while the
consumers finish the current one, and both sides walk the same tiles in the same order,
so acquires and waits stay balanced.  A role-less kernel runs its whole body per tile
with a block barrier at the end (its next tile's copies refill buffers slower warps may
still read).

Applies only where that is sound without further analysis: no clusters, no raw mbarriers
(their parities would need to alternate per tile), and no shared-memory writes other than
copies into pipeline stages or a role-less kernel's own ring (a role that stages its
epilogue in smem would overwrite it while the previous tile's store may still read it).
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cake_core.diagnostics.model import TextEdit
from cake_core.hardware import default_gpu, get_arch
from cake_core.ir.kernel import Kernel
from cake_core.ir.symbolic import is_sm_count
from cake_core.ir.tile_order import DEFAULT_GROUP
from cake_core.ir.types import PipelineType
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.kernel_text import (
    Stmt,
    fresh_name,
    header_end,
    indent,
    indent_of,
    kernel_def,
    lines_span,
    names_in_text,
    operand,
    statements,
)

AXES = ("x", "y", "z")
#: Top-level ops that may stay outside the tile loop.
DECL_OPS = frozenset({"smem", "pipeline"})
#: Ops that make a per-tile repetition unsound without more analysis.
RAW_BARRIER_OPS = frozenset({"mbarrier", "expect_tx", "arrive", "fence_barrier_init"})


@dataclass
class Persistent:
    kernel: Kernel
    body: list[Stmt]
    decls: list[Stmt]
    roles: list[tuple[Stmt, list[Stmt]]]
    """Each role's `with` statement and its body (empty when the kernel has no roles)."""
    loose: list[Stmt]
    """A role-less kernel's statements after the declarations (run once per tile)."""
    grid_texts: list[str]
    grid_span: Any
    sms: int
    gpu: str


def _grid_call(source: SourceFile, kernel: Kernel) -> tuple[list[str], Any] | None:
    fn = kernel_def(source, kernel)
    if fn is None or not fn.decorators or not isinstance(fn.decorators[0], ast.Call):
        return None
    for kw in fn.decorators[0].keywords:
        if kw.name == "grid":
            v = kw.value
            elts = v.elts if isinstance(v, ast.Tuple) else (v,)
            return [source.snippet(e.span).strip() for e in elts], v.span
    return None


def _plan(kernel: Kernel, source: SourceFile) -> Persistent | None:
    spec = get_arch(kernel.arch)
    if spec is None or any(c > 1 for c in kernel.cluster) or not 1 <= len(kernel.grid) <= 3:
        return None
    if all(g.const is not None for g in kernel.grid) or any(
            is_sm_count(a) for g in kernel.grid for a in g.atoms()):
        return None  # a fixed or SM-sized grid: already persistent, or nothing that scales
    if any(op.name in RAW_BARRIER_OPS or (op.name == "wait" and not isinstance(
            op.args["self"].type, PipelineType)) for op in kernel.ops()):
        return None
    grid = _grid_call(source, kernel)
    fn = kernel_def(source, kernel)
    if grid is None or fn is None:
        return None
    body = statements(source, kernel, fn.body, header_end(source, fn))
    decls: list[Stmt] = []
    roles: list[tuple[Stmt, list[Stmt]]] = []
    loose: list[Stmt] = []
    for s in body:
        if isinstance(s.node, ast.With):
            roles.append((s, statements(source, kernel, s.node.body, s.node.span.start.line)))
        elif not loose and (not s.ops or s.only(DECL_OPS)) and not _uses_block(s.text):
            decls.append(s)
        elif kernel.roles:
            return None  # top-level work outside the roles
        else:
            loose.append(s)
    if kernel.roles and len(roles) != len(kernel.roles):
        return None
    if not kernel.roles and not loose:
        return None
    # shared memory written outside pipeline stages: unsafe to repeat per tile in a role
    for _, rbody in roles:
        for s in rbody:
            for op in s.ops:
                if op.name == "tma_load" and isinstance(op.args["bar"].type, PipelineType):
                    continue
                if any(a in op.args and _is_smem(op.args[a]) for a in op.prim.effects.writes):
                    return None
    gpu = default_gpu(spec.name)
    texts, span = grid
    if len(texts) != len(kernel.grid):
        return None
    return Persistent(kernel, body, decls, roles, loose, texts, span, gpu.sms, gpu.name)


def _is_smem(v: Any) -> bool:
    from cake_core.ir.types import SmemType

    return isinstance(v.type, SmemType)


def _uses_block(text: str) -> bool:
    return bool(_block_refs(text))


def _block_refs(text: str) -> list[tuple[int, int, int, str]]:
    """(line, start col, end col, axis) of every `block.<axis>` in `text` (tokens only)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    out = []
    for a, b, c in zip(toks, toks[1:], toks[2:], strict=False):
        if a.type == tokenize.NAME and a.string == "block" and b.string == "." and \
                c.type == tokenize.NAME and c.string in AXES and a.end == b.start and \
                b.end == c.start:
            out.append((a.start[0] - 1, a.start[1], c.end[1], c.string))
    return out


def _replace_block(text: str, names: dict[str, str]) -> str | None:
    """`block.x` -> names["x"] (None when an axis has no tile coordinate)."""
    lines = text.split("\n")
    for row, start, end, axis in sorted(_block_refs(text), reverse=True):
        if axis not in names:
            return None
        lines[row] = lines[row][:start] + names[axis] + lines[row][end:]
    return "\n".join(lines)


def _coords(plan: Persistent, order: str, tile: str, names: dict[str, str]) -> list[str]:
    """Tile coordinates from the tile index, `order` axis fastest."""
    axes = list(AXES[:len(plan.grid_texts)])
    if order in axes:
        axes.remove(order)
        axes.insert(0, order)
    ext = dict(zip(AXES, plan.grid_texts, strict=False))
    out, stride = [], ""
    for i, a in enumerate(axes):
        idx = tile if not stride else f"{tile} // {operand(stride)}"
        out.append(f"{names[a]} = {idx}" if i == len(axes) - 1 else
                   f"{names[a]} = {operand(idx)} % {operand(ext[a])}")
        stride = ext[a] if not stride else f"{stride} * {operand(ext[a])}"
    return out




def _render(plan: Persistent, source: SourceFile, order: str,
            group: int) -> tuple[TextEdit, ...] | None:
    taken = names_in_text(source.text)
    tile = fresh_name(taken, "tile_id", "tile_index")
    ntiles = fresh_name(taken, "ntiles", "num_tiles")
    names = {a: fresh_name(taken, f"tile_{a}") for a in AXES[:len(plan.grid_texts)]}
    if len(plan.grid_texts) == 1:
        names = {"x": tile}
        coords: list[str] = []
    elif len(plan.grid_texts) == 2:
        gx, gy = plan.grid_texts
        raster = "m" if order == "x" else "n"
        coords = [f"{names['x']}, {names['y']} = tile_coords({tile}, {gx}, {gy}, "
                  f"group={group}, raster=\"{raster}\")"]
    else:
        coords = _coords(plan, order, tile, names)
    step = "    "
    unit = indent_of(source.line_text(plan.body[0].node.span.start.line))
    total = " * ".join(operand(g) for g in plan.grid_texts)
    header = f"for {tile} in range(block.x, {ntiles}, sm_count()):"
    blocks = [s.text for s in plan.decls]
    blocks.append(f"{ntiles} = {total}   # output tiles, shared out among the SMs")

    def wrapped(stmts: list[Stmt], depth: int, barrier: bool) -> list[str] | None:
        pad = step * depth
        out = [pad + header] + [pad + step + c for c in coords]
        for s in stmts:
            t = _replace_block(s.text, names)
            if t is None:
                return None
            out.append(indent(t, pad + step))
        if barrier:
            out.append(f"{pad}{step}syncthreads()   # every warp is done with this tile's "
                       "buffers")
        return out

    if plan.roles:
        for with_stmt, rbody in plan.roles:
            lead = with_stmt.text.split("\n")[:with_stmt.node.span.start.line
                                               - with_stmt.first_line + 1]
            blocks.append("\n".join(lead))
            inner = wrapped(rbody, 1, False)
            if inner is None:
                return None
            blocks += inner
    else:
        smem = any(_is_smem(op.args[a]) for s in plan.loose for op in s.ops
                   for a in op.prim.effects.writes if a in op.args)
        inner = wrapped(plan.loose, 0, smem)
        if inner is None:
            return None
        blocks += inner
    start, end = lines_span(source, plan.body)
    # one block per SM of the device, or per tile when there are fewer tiles: either way
    # the loop's step `sm_count()` shares every tile out once (CK326)
    return (TextEdit(source.span(start, end), "\n".join(indent(b, unit) for b in blocks)),
            TextEdit(plan.grid_span, f"(min(sm_count(), {total}),)"))


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    plan = _plan(kernel, source)
    if plan is None:
        return None
    return ("one block per output tile: one persistent block per SM (sm_count(), "
            f"{plan.sms} on the {plan.gpu}) would loop over the tiles, with no wave tail "
            "and one prologue per SM")


def _variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    plan = _plan(kernel, source)
    if plan is None:
        return []
    if len(plan.grid_texts) == 1:
        return [{"order": "x"}]
    if len(plan.grid_texts) == 2:
        return [{"order": o, "group": g} for o in ("x", "y") for g in (DEFAULT_GROUP, 1)]
    return [{"order": "x"}, {"order": "y"}]


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    plan = _plan(kernel, source)
    if plan is None:
        return None
    order = params.get("order", "x")
    group = params.get("group", DEFAULT_GROUP)
    if order not in AXES[:len(plan.grid_texts)] or not isinstance(group, int) or group < 1:
        return None
    edits = _render(plan, source, order, group)
    if not edits:
        return None
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    out = {"order": order, "group": group, "sms": plan.sms, "predicted": done[1]}
    grouped = f", in bands of {group} tiles" if len(plan.grid_texts) == 2 else ""
    return TacticResult(edits, "persistent tiles: sm_count() blocks loop over the output "
                        f"tiles, block.{order} fastest{grouped}; pipelines run across tiles",
                        out)


PERSISTENT_TILES = Tactic(
    "persistent-tiles",
    "Launch one block per SM and loop each over output tiles (persistent scheduling).",
    _applies, _apply, _variants,
    Provenance("hand-written", "2026-12-02", ("examples/gemm_sm90.cake",
                                              "examples/gemm_sm80.cake")))
