"""CK326: a persistent tile loop that skips or repeats output tiles.

A persistent block walks `for t in range(block.x, n, S)`: block `b` visits `b, b + S,
b + 2S, ...`.  With `G` blocks launched along x, tile `t` is visited by every block
`b < G` with `b <= t` and `(t - b) % S == 0`, so every tile of `[0, n)` is visited
exactly once if and only if

- `S == G`: each window of `S` consecutive tiles is shared out once, or
- `n <= S` and `n <= G`: no block's loop comes round a second time, and a block
  exists for every tile.

`grid=(min(sm_count(), n),)` with step `sm_count()` is the second case when there are
fewer tiles than SMs and the first otherwise, so it is clean.  A step smaller than the
grid visits tile `S` twice (blocks 0 and `S`); a larger one never visits tiles
`G .. min(S, n) - 1` -- the classic bug is a step written as a number (`132`) while the
grid is sized some other way.

A loop is a tile loop when its start is exactly a block index `block.<axis>`.  A step that
is the grid extent itself needs no evaluation; otherwise `G`, `S` and `n` are evaluated
over a set of launches (each dim at a few multiples of its declared factor, within its
`max`, and `sm_count()` at several counts) and the first launch where neither condition
holds is reported, with the tiles it skips or repeats.  That is a proof by example, so
there are no false alarms; a bug that shows at none of the sampled launches is missed.

The fix writes the grid extent as the step.  It is offered as unsafe: it makes this rule
hold by construction, but the grid's text is moved into the kernel body, where a local
of the same name would change its meaning, and a different step changes what the other
rules see.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit
from cake_core.ir.kernel import ForOp, Kernel, Program, walk_nodes
from cake_core.ir.symbolic import SM_COUNT, BinExpr, Const, Dim, SymExpr, Var, apply_op
from cake_core.source import SourceFile
from cake_core.verify.edits import SourceIndex
from cake_core.verify.source_text import loop_header_span, range_arg_texts, tuple_texts

#: Every code this pass may emit.
CODES = (codes.TILE_LOOP_STRIDE,)

_AXES = ("x", "y", "z")
#: Multiples of a dim's declared factor tried as its value, sizes a task would run first.
_DIM_FACTORS = (1000, 100, 16, 5, 3, 2, 1)
#: SM counts tried for `sm_count()`, an H100's first.
_SM_COUNTS = (132, 8, 3, 2, 1)
#: The most launches evaluated per loop.
MAX_LAUNCHES = 4096


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    index = SourceIndex(program, source)
    for kernel in program.kernels:
        for loop in _tile_loops(kernel):
            d = _check_loop(kernel, loop, source, index)
            if d is not None:
                out.append(d)
    return out


def _tile_loops(kernel: Kernel) -> Iterator[tuple[ForOp, int]]:
    nodes = [*kernel.body, *(n for r in kernel.roles.values() for n in r.body)]
    seen: set[int] = set()
    for n in walk_nodes(nodes):
        if isinstance(n, ForOp) and id(n) not in seen and isinstance(n.start, Var) and \
                n.start.name.startswith("block.") and n.start.name[6:] in _AXES:
            seen.add(id(n))
            yield n, _AXES.index(n.start.name[6:])


def _extent(kernel: Kernel, axis: int) -> SymExpr:
    return kernel.grid[axis] if axis < len(kernel.grid) else Const(1)


def _value(e: SymExpr, env: dict[str, int]) -> int | None:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Dim):
        return env.get(e.name)
    if not isinstance(e, BinExpr):
        return None  # a runtime index: no launch-time value
    a, b = _value(e.left, env), _value(e.right, env)
    if a is None or b is None or (e.op in ("//", "%", "cdiv") and b == 0):
        return None
    return apply_op(e.op, a, b)


def _launches(exprs: tuple[SymExpr, ...]) -> Iterator[dict[str, int]]:
    found: dict[str, Dim] = {}
    for e in exprs:
        for a in e.atoms():
            if isinstance(a, Dim):
                found[a.name] = a
    # sm_count() first, then the dims by name: the same launch is reported every run
    dims = {n: found[n] for n in sorted(found, key=lambda n: (n != SM_COUNT, n))}
    choices: list[list[int]] = []
    for d in dims.values():
        if d.name == SM_COUNT:
            choices.append(list(_SM_COUNTS))
            continue
        vals = list(dict.fromkeys(f * d.multiple_of for f in _DIM_FACTORS
                                  if d.max is None or f * d.multiple_of <= d.max))
        choices.append(vals or [d.multiple_of])
    names = list(dims)
    for combo in itertools.islice(itertools.product(*choices), MAX_LAUNCHES):
        yield dict(zip(names, combo, strict=True))


def _problem(grid: int, step: int, tiles: int) -> str | None:
    """Why blocks `range(grid)` striding by `step` over `range(tiles)` miss or repeat a
    tile, or None when each tile is visited once."""
    if step == grid or (tiles <= step and tiles <= grid) or tiles <= 0:
        return None
    if grid < step:
        last = min(step, tiles) - 1
        which = f"tile {grid}" if last == grid else f"tiles {grid}..{last}"
        return f"{which} {'is' if last == grid else 'are'} never visited"
    return f"tile {step} is visited twice (by blocks 0 and {step})"


def _check_loop(kernel: Kernel, found: tuple[ForOp, int], source: SourceFile,
                index: SourceIndex) -> Diagnostic | None:
    loop, axis = found
    grid = _extent(kernel, axis)
    if loop.step == grid:
        return None
    for env in _launches((grid, loop.step, loop.stop)):
        g, s, n = (_value(e, env) for e in (grid, loop.step, loop.stop))
        if g is None or s is None or n is None or s <= 0:
            continue
        why = _problem(g, s, n)
        if why is None:
            continue
        shape = ", ".join(f"{k}={v}" for k, v in env.items()) or "every launch"
        ax = _AXES[axis]
        return codes.TILE_LOOP_STRIDE.at(
            loop_header_span(source, loop),
            f"the tile loop strides by {loop.step} but the grid launches {grid} blocks "
            f"along {ax}: {why}",
            notes=(f"at {shape}: grid.{ax} = {g}, step = {s}, {n} tiles",
                   "stride a persistent tile loop by the grid extent it is launched with "
                   "(or launch `min(S, tiles)` blocks for a step S)"),
            fixes=_fix(kernel, loop, axis, source, index))
    return None


def _fix(kernel: Kernel, loop: ForOp, axis: int, source: SourceFile,
         index: SourceIndex) -> list[Fix]:
    args = range_arg_texts(source, loop)
    call = index.decorator_call(kernel)
    if args is None or len(args) != 3 or call is None:
        return []
    grid_kw = next((kw for kw in call.keywords if kw.name == "grid"), None)
    if grid_kw is None:
        return []
    elts = tuple_texts(source, grid_kw.value.span, len(kernel.grid))
    if elts is None or axis >= len(elts):
        return []
    text = elts[axis][0]
    return [Fix(f"stride by the grid extent `{text}`", (TextEdit(args[2][1], text),),
                Applicability.UNSAFE)]


__all__ = ["CODES", "check"]
