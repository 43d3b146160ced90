"""Tactics that retune a kernel without restructuring it.

Each one is a typed rewrite: `applies` says why it is worth trying, `variants` lists the
parameter sets to explore, `apply` returns text edits plus a rationale — and returns
None when the rewritten kernel would not verify, so no caller ever sees a broken move.
Every result carries the cost model's before/after time in `params["predicted"]`
(`predicted.py`), so a move can be ranked before anything runs.  `TACTICS` also holds
the structural tactics of `structural.py`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from cake_core.diagnostics.model import TextEdit
from cake_core.ir.kernel import Kernel, Program
from cake_core.ir.types import PipelineType, SmemType
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite import (
    constant_site,
    constants_used_in,
    ops_named,
    role_regs_site,
    value_site,
    verified,
)
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile, Span
from cake_tactics.structural import STRUCTURAL

PROV = Provenance("hand-written", "2026-11-30", ("examples/gemm_sm90.cake",
                                                   "examples/kmeans_assign_sm90.cake"))
_TILE_NAME = re.compile(r"^(B|W|BLOCK_|TILE_)[A-Z]*$")


def _program(kernel: Kernel, source: SourceFile) -> Program | None:
    """The program around `kernel` (its top-level constants).  Every tactic asks for it
    several times per candidate, and the agents' previews ask for the same parent
    again and again, so it is kept per text; the type check suffices, no verifier."""
    return _typed(source.text, source.path)


@functools.lru_cache(maxsize=32)
def _typed(text: str, path: str) -> Program | None:
    from cake_core.check import check_source

    return check_source(SourceFile(text, path), passes=()).program


def _finish(kernel: Kernel, source: SourceFile, edits: tuple[TextEdit, ...], rationale: str,
            params: dict[str, Any]) -> TacticResult | None:
    """The result when the edited file verifies, with the cost model's before/after."""
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    return TacticResult(edits, rationale, {**params, "predicted": done[1]})


# --- tile sizes ---------------------------------------------------------------------------
def _tile_constants(kernel: Kernel, source: SourceFile) -> dict[str, tuple[Span, int]]:
    program = _program(kernel, source)
    if program is None:
        return {}
    spans = [op.arg_spans["shape"] for op in kernel.ops()
             if op.name in ("smem", "tile") and "shape" in op.arg_spans]
    # a constant in a parameter's type is a problem size (D of a (B, N, D) tensor): changing
    # it changes what the kernel computes, not how, so it is not a tile size
    problem = set(constants_used_in(source, program, [p.span for p in kernel.params]))
    out = {}
    for name in constants_used_in(source, program, spans):
        site = constant_site(program, source, name)
        if site is not None and "STAGE" not in name.upper() and site[1] >= 8 and \
                name not in problem:
            out[name] = site
    return out


def _tile_applies(kernel: Kernel, source: SourceFile) -> str | None:
    names = _tile_constants(kernel, source)
    if not names:
        return None
    listed = ", ".join(f"{n}={v}" for n, (_, v) in names.items())
    return f"tile shape constants {listed} set the work per block and per copy"


def _warp_grid(values: dict[str, int]) -> int | None:
    """How many warps the block-tile / warp-tile pairs (BM and WM, BN and WN, ...) ask for:
    the product of the ratios, None when there is no pair or a ratio is not whole."""
    pairs = [(name, "W" + name[1:]) for name in values
             if name.startswith("B") and "W" + name[1:] in values]
    if not pairs:
        return None
    warps = 1
    for block_tile, warp_tile in pairs:
        if values[warp_tile] <= 0 or values[block_tile] % values[warp_tile]:
            return None
        warps *= values[block_tile] // values[warp_tile]
    return warps


def _breaks_warp_grid(kernel: Kernel, consts: dict[str, tuple[Span, int]], name: str,
                      value: int) -> bool:
    """Whether the change leaves the warps unable to cover the block tile.

    A kernel whose block tile is split among its warps (gemm_sm80: BM/WM x BN/WN = 2 x 2
    warps) computes the whole tile only while that product equals its warp count: BM 256
    with four 64-row warps verifies, yet leaves half of C unwritten.  The verifier does not
    see it (nothing is out of bounds), so the tactic does not offer it."""
    before = {n: v for n, (_, v) in consts.items()}
    if _warp_grid(before) != kernel.warps:
        return False  # the warps are not laid out over these tiles: nothing to keep
    return _warp_grid({**before, name: value}) != kernel.warps


def _tile_variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    out = []
    consts = _tile_constants(kernel, source)
    for name, (_, v) in consts.items():
        for nv in (v // 2, v * 2):
            if 16 <= nv <= 256 and nv % 16 == 0 and \
                    not _breaks_warp_grid(kernel, consts, name, nv):
                out.append({"name": name, "value": nv})
    return out


def _tile_apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]
                ) -> TacticResult | None:
    name, value = params.get("name"), params.get("value")
    consts = _tile_constants(kernel, source)
    site = consts.get(str(name))
    if site is None or not isinstance(value, int) or value == site[1] or \
            _breaks_warp_grid(kernel, consts, str(name), value):
        return None
    span, old = site
    why = ("smaller tiles: more blocks to fill the SMs and fewer wasted edge rows"
           if value < old else "larger tiles: more reuse per byte loaded")
    return _finish(kernel, source, (TextEdit(span, str(value)),),
                   f"{name} {old} -> {value}: {why}", {"name": name, "value": value})


# --- stage count --------------------------------------------------------------------------
def _stage_site(kernel: Kernel, source: SourceFile) -> tuple[Span, int] | None:
    program = _program(kernel, source)
    if program is None:
        return None
    for op in ops_named(kernel, "pipeline"):
        span = op.arg_spans.get("stages")
        if span is not None:
            site = value_site(program, source, span)
            if site is not None:
                return site
    for name in program.constant_spans:
        if "STAGE" in name.upper():
            site = constant_site(program, source, name)
            if site is not None:
                return site
    return None


def _stages_applies(kernel: Kernel, source: SourceFile) -> str | None:
    site = _stage_site(kernel, source)
    if site is None:
        return None
    return f"the copy ring has {site[1]} stages; depth trades shared memory for latency hiding"


def _stages_variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    site = _stage_site(kernel, source)
    if site is None:
        return []
    return [{"stages": n} for n in range(2, 13) if n != site[1]] + [{"stages": "max"}]


def _stages_apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]
                  ) -> TacticResult | None:
    site = _stage_site(kernel, source)
    if site is None:
        return None
    span, old = site
    want = params.get("stages")
    if want == "max":
        for n in range(16, 1, -1):
            edits = (TextEdit(span, str(n)),)
            if not _fits(source, edits):
                continue
            if n == old:
                if verified(source, edits) is not None:
                    return None  # the current depth is already the deepest that fits
                continue
            done = verified_rewrite(kernel, source, edits)
            if done is not None:
                return TacticResult(edits, f"stages {old} -> {n}: the deepest ring that fits "
                                    "in shared memory", {"stages": n, "predicted": done[1]})
        return None
    if not isinstance(want, int) or want < 1 or want == old:
        return None
    why = "more copies in flight hide more memory latency" if want > old else \
        "fewer stages free shared memory (for occupancy or a staged epilogue)"
    return _finish(kernel, source, (TextEdit(span, str(want)),),
                   f"stages {old} -> {want}: {why}", {"stages": want})


def _fits(source: SourceFile, edits: tuple[TextEdit, ...]) -> bool:
    """Whether the edited file type-checks and fits the GPU's resources.

    A necessary condition for `verified`, at a fraction of its price: the full verifier
    simulates every role for deadlocks and races, seconds on a persistent warp-specialised
    kernel, and `max` would pay that for each depth that does not even fit in shared
    memory.  Only depths that pass this are verified in full.
    """
    from cake_core.rewrite import check_edited
    from cake_core.verify import resources

    return not check_edited(source, edits, passes=[resources.check]).errors


# --- swizzle ------------------------------------------------------------------------------
def _buffers(kernel: Kernel) -> dict[str, Any]:
    return {op.results[0].name: op for op in ops_named(kernel, "smem")
            if op.results and isinstance(op.results[0].type, SmemType)}


def _swizzle_applies(kernel: Kernel, source: SourceFile) -> str | None:
    bufs = _buffers(kernel)
    if not bufs:
        return None
    return f"{len(bufs)} shared-memory buffer(s) whose layout decides bank conflicts and " \
           "what TMA/wgmma can read"


def _swizzle_variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    out = []
    for name, op in _buffers(kernel).items():
        cur = op.results[0].type.layout.swizzle
        out += [{"buffer": name, "swizzle": s} for s in (0, 32, 64, 128) if s != cur]
    return out


def _swizzle_apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]
                   ) -> TacticResult | None:
    op = _buffers(kernel).get(str(params.get("buffer")))
    sw = params.get("swizzle")
    if op is None or sw not in (0, 32, 64, 128):
        return None
    old = op.results[0].type.layout
    if old.swizzle == sw:
        return None
    new = f"swizzle({sw})" if sw else "row_major"
    if "layout" in op.arg_spans:
        edit = TextEdit(op.arg_spans["layout"], new)
    else:
        close = op.span.end.offset - 1
        edit = TextEdit(source.span(close, close), f", layout={new}")
    name = op.results[0].name
    return _finish(kernel, source, (edit,),
                   f"{name}: {old} -> {new} to change how rows map to banks",
                   {"buffer": name, "swizzle": sw})


# --- register split -----------------------------------------------------------------------
def _reg_roles(kernel: Kernel, source: SourceFile) -> dict[str, tuple[Span, int, int]]:
    out = {}
    for role in kernel.roles.values():
        site = role_regs_site(source, role)
        if site is not None:
            out[role.name] = (site[0], site[1], role.warps)
    return out


def _regs_applies(kernel: Kernel, source: SourceFile) -> str | None:
    roles = _reg_roles(kernel, source)
    if len(roles) < 2:
        return None
    return "roles set their register budgets with setmaxnreg; the split can move registers " \
           "from the producer to the math warps"


def _split(roles: dict[str, tuple[Span, int, int]], low: int) -> dict[str, int] | None:
    """Give the role with the fewest registers `low`, the rest the most that fits."""
    donor = min(roles, key=lambda r: roles[r][1])
    used = roles[donor][2] * 32 * low
    others = [r for r in roles if r != donor]
    threads = sum(roles[r][2] * 32 for r in others)
    if threads == 0:
        return None
    high = min(256, ((65536 - used) // threads) // 8 * 8)
    if high < 24:
        return None
    return {donor: low, **{r: high for r in others}}


def _regs_variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    roles = _reg_roles(kernel, source)
    if len(roles) < 2:
        return []
    out = []
    for low in (24, 32, 40, 56, 80):
        split = _split(roles, low)
        if split and any(split[r] != roles[r][1] for r in roles):
            out.append({"regs": split})
    return out


def _regs_apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]
                ) -> TacticResult | None:
    roles = _reg_roles(kernel, source)
    split = params.get("regs")
    if not isinstance(split, dict) or set(split) - set(roles):
        return None
    edits = tuple(TextEdit(roles[r][0], str(v)) for r, v in split.items() if roles[r][1] != v)
    if not edits:
        return None
    desc = ", ".join(f"{r} {roles[r][1]} -> {v}" for r, v in split.items())
    return _finish(kernel, source, edits, f"rebalance setmaxnreg: {desc}", {"regs": split})


TILE_SIZE = Tactic("tile-size", "Change a tile-size constant (BM, BN, BK, ...).",
                   _tile_applies, _tile_apply, _tile_variants, PROV)
STAGES = Tactic("stages", "Set the pipeline stage count (or the most that fits).",
                _stages_applies, _stages_apply, _stages_variants, PROV)
SWIZZLE = Tactic("swizzle", "Change the swizzle of a shared-memory buffer.",
                 _swizzle_applies, _swizzle_apply, _swizzle_variants, PROV)
REGISTERS = Tactic("rebalance-registers", "Move setmaxnreg registers between roles.",
                   _regs_applies, _regs_apply, _regs_variants, PROV)

#: The retuning tactics of this module (the structural ones live in `structural.py`).
RETUNING = (TILE_SIZE, STAGES, SWIZZLE, REGISTERS)

TACTICS = RETUNING + STRUCTURAL

__all__ = ["REGISTERS", "RETUNING", "STAGES", "SWIZZLE", "TACTICS", "TILE_SIZE", "PipelineType"]
