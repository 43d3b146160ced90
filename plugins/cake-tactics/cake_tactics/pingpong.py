"""consumer-pingpong: split a two-warpgroup consumer into two roles that take turns.

The form it rewrites is the one `accumulator-double-buffer` starts from, in a role of two
warpgroups that is its pipeline's only consumer:

    with role("dist", warps=range(a, a + 8), ...):
        ...
        for j in range(n):
            s = p.wait()
            acc = fragment(f32, (R, ...), layout=wgmma_acc)
            wgmma(acc, A, ...)                 # A: a (R, K) shared-memory view
            wgmma_wait(0)
            ...

Both warpgroups wait for the same stage, issue together, drain together and run their
math together.  The rewrite makes each warpgroup a role of its own (`dist0`, `dist1`,
both consumers of the pipeline) owning R / 2 of the rows: its fragments get R // 2 rows,
its wgmmas read its half of A (`A.tile((R/2, K), (r, 0))`), and its stores write its half
of each tile (the row coordinate c becomes 2 * c + r).  Two free named barriers over
both roles' warps hand the turn to issue over: dist0 issues iteration j, then dist1 does,
so one's MMA runs while the other runs its math.

The rewrite is offered only when it verifies and when the simulator, on small shapes with
the same random inputs, finds nothing and writes exactly the original's outputs.
"""

from __future__ import annotations

import re
from typing import Any

from cake_core.diagnostics.model import TextEdit
from cake_core.ir.kernel import Kernel, Role
from cake_core.ir.types import FragmentType, PipelineType, SmemType, const_shape
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.double_buffer import _find, _Form, _same_on_small_shapes
from cake_tactics.kernel_text import kernel_def, split_top_level

PROV = Provenance("hand-written", "2026-12-04", ("examples/kmeans_assign_sm90_pingpong.cake",))
_HEADER = re.compile(r'role\(\s*"(\w+)"\s*,\s*warps\s*=\s*range\([^)]*\)')
_TILE = re.compile(r"\.tile\(\(([^()]*)\)\s*,\s*\(([^()]*)\)\)")


def _role_of(kernel: Kernel, f: _Form) -> Role | None:
    at = f.loop.span.start.offset
    for r in kernel.roles.values():
        if r.span.start.offset <= at < r.span.end.offset:
            return r
    return None


def _with_of(source: SourceFile, kernel: Kernel, role: Role) -> ast.With | None:
    fn = kernel_def(source, kernel)
    for s in fn.body if fn is not None else ():
        if isinstance(s, ast.With) and s.span.start.offset <= role.name_span.start.offset \
                < s.span.end.offset:
            return s
    return None


def _free_ids(text: str) -> tuple[int, int] | None:
    used = {int(m) for m in re.findall(r"barrier_(?:sync|arrive)\(\s*(\d+)", text)}
    free = [i for i in range(1, 16) if i not in used]
    return (free[0], free[1]) if len(free) >= 2 else None


def _plan(kernel: Kernel, source: SourceFile) -> tuple[_Form, Role, ast.With, int] | None:
    """The drained loop, its role, the role's `with` block and the accumulator's rows."""
    f = _find(kernel, source)
    if f is None:
        return None
    role = _role_of(kernel, f)
    if role is None or role.warps != 8 or role.warp_start % 4:
        return None
    consumers = [v.type.consumers for v in kernel.values.values()
                 if isinstance(v.type, PipelineType) and role.name in v.type.consumers]
    if len(consumers) != 1 or consumers[0] != (role.name,):
        return None
    acc_t = f.frag.ops[0].results[0].type
    if not isinstance(acc_t, FragmentType) or acc_t.shape[0].const != 128:
        return None
    w = _with_of(source, kernel, role)
    if w is None or _free_ids(source.text) is None:
        return None
    return f, role, w, 128


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    p = _plan(kernel, source)
    if p is None:
        return None
    return (f"role '{p[1].name}' runs its two warpgroups in lockstep on one stage: both "
            "issue, drain and run their math together")


def _variants(kernel: Kernel, source: SourceFile) -> list[dict[str, Any]]:
    return [{}] if _plan(kernel, source) is not None else []


def _half_rows(line: str, rows: str) -> str:
    """`fragment(dt, (R, ...)` -> `fragment(dt, (R // 2, ...)`."""
    return re.sub(r"(fragment\(\s*\w+\s*,\s*\()\s*" + re.escape(rows) + r"\s*([,)])",
                  lambda m: f"{m.group(1)}{rows} // 2{m.group(2)}", line)


def _half_tile(line: str, rows: str, r: int) -> str:
    """In a store, the tile's R-row extent halves and its coordinate c becomes 2 * c + r."""
    def sub(m: re.Match[str]) -> str:
        shape = [x.strip() for x in split_top_level(m.group(1))]
        coords = [x.strip() for x in split_top_level(m.group(2))]
        if rows not in shape or len(shape) != len(coords):
            return m.group(0)
        d = shape.index(rows)
        shape[d] = f"{rows} // 2"
        c = coords[d] if re.fullmatch(r"[\w.]+", coords[d]) else f"({coords[d]})"
        coords[d] = f"2 * {c} + {r}"
        return f".tile(({', '.join(shape)}), ({', '.join(coords)}))"
    return _TILE.sub(sub, line) if "store(" in line else line


def _rows_text(source: SourceFile, f: _Form) -> str | None:
    """The accumulator's row extent as written (`BM` in `fragment(f32, (BM, BN), ...)`)."""
    rows = re.match(r"\s*fragment\(\s*\w+\s*,\s*\(\s*([^,()]+?)\s*,",
                    source.line_text(f.frag.node.span.start.line).split("=", 1)[1])
    return rows.group(1) if rows is not None else None


def _role_text(source: SourceFile, f: _Form, role: Role, w: ast.With, r: int,
               ids: tuple[int, int], a_views: dict[str, str]) -> str:
    mine, other = (ids[0], ids[1]) if r == 0 else (ids[1], ids[0])
    rows_text = _rows_text(source, f)
    assert rows_text is not None
    wait_end = f.wait.node.span.end.line
    issue_end = f.issue[-1].node.span.end.line
    pad = re.match(r"\s*", source.line_text(f.wait.node.span.start.line)).group(0)  # type: ignore[union-attr]
    out: list[str] = []
    for ln in range(w.span.start.line, w.span.end.line + 1):
        text = source.line_text(ln)
        if ln == w.span.start.line:
            text = _HEADER.sub(f'role("{role.name}{r}", warps=range('
                               f"{role.warp_start + 4 * r}, {role.warp_start + 4 * r + 4})", text)
        text = _half_tile(_half_rows(text, rows_text), rows_text, r)
        for a, view in a_views.items():
            text = text.replace(f"wgmma({f.acc}, {a},", f"wgmma({f.acc}, {view.format(r=r)},")
        out.append(text)
        if ln == wait_end:
            if r == 0:
                out.append(f"{pad}if {f.var} > 0:")
                out.append(f"{pad}    barrier_sync({mine}, 8)   # the other warpgroup issued "
                           f"iteration {f.var} - 1")
            else:
                out.append(f"{pad}barrier_sync({mine}, 8)   # the other warpgroup issued "
                           f"iteration {f.var}")
        if ln == issue_end:
            if r == 0:
                out.append(f"{pad}barrier_arrive({other}, 8)   # its turn to issue")
            else:
                out.append(f"{pad}if {f.var} < {f.stop} - 1:")
                out.append(f"{pad}    barrier_arrive({other}, 8)   # its turn to issue")
    return "\n".join(out)


def _a_views(f: _Form, rows: str) -> dict[str, str] | None:
    """Each wgmma's A operand text -> its half, a `{r}`-format string: the A of a 128-row
    accumulator is a (128, K) shared-memory view, each warpgroup reads its 64 rows.  The
    half is written in the accumulator's own row expression (`BM // 2`, not 64), so a later
    change of that tile constant (two 64-row slabs per warpgroup) keeps the views right."""
    views: dict[str, str] = {}
    for s in f.issue:
        for op in s.ops:
            if op.name != "wgmma":
                continue
            t = op.args["a"].type
            shape = const_shape(t.shape) if isinstance(t, SmemType) else None
            if shape is None or len(shape) != 2 or shape[0] != 128:
                return None
            m = re.search(rf"wgmma\(\s*{re.escape(f.acc)}\s*,\s*([^,]+?)\s*,", s.text)
            if m is None:
                return None
            half = f"{rows} // 2" if re.fullmatch(r"[\w.]+", rows) else f"({rows}) // 2"
            views[m.group(1)] = f"{m.group(1)}.tile(({half}, {shape[1]}), ({{r}}, 0))"
    return views or None


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    p = _plan(kernel, source)
    if p is None:
        return None
    f, role, w, _rows = p
    ids = _free_ids(source.text)
    rows = _rows_text(source, f)
    views = _a_views(f, rows) if rows is not None else None
    if ids is None or views is None:
        return None
    try:
        roles = "\n".join(_role_text(source, f, role, w, r, ids, views) for r in (0, 1))
    except (AssertionError, AttributeError, KeyError):
        return None
    start = source.offset_of(w.span.start.line, 0)
    end = source.offset_of(w.span.end.line, 0) + len(source.line_text(w.span.end.line).encode())
    m = re.search(rf'consumer\s*=\s*"{re.escape(role.name)}"', source.text)
    if m is None:
        return None
    head = source.text[:m.start()].encode()
    cons = TextEdit(source.span(len(head), len(head) + len(m.group(0).encode())),
                    f'consumer=("{role.name}0", "{role.name}1")')
    edits = (cons, TextEdit(source.span(start, end), roles))
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    if not _same_on_small_shapes(kernel, f.ir_loop, source.text, done[0], source.path):
        return None
    return TacticResult(
        edits, f"ping-pong role '{role.name}': one role per warpgroup (`{role.name}0`, "
        f"`{role.name}1`), half the rows each, taking turns to issue wgmmas (named barriers "
        f"{ids[0]} and {ids[1]}) so one's MMA runs under the other's math",
        {"predicted": done[1]})


CONSUMER_PINGPONG = Tactic(
    "consumer-pingpong",
    "Split a two-warpgroup consumer role into one role per warpgroup that take turns to "
    "issue wgmmas (named barriers), so one's MMA overlaps the other's math.",
    _applies, _apply, _variants, PROV)

__all__ = ["CONSUMER_PINGPONG"]
