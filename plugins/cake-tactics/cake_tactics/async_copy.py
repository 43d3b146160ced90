"""`async-copy`: switch a copy ring between cp.async (sm_80 and later) and TMA (sm_90a).

The two forms, and how a kernel's ring is recognised, are in `rings`; each form is
rewritten here into the other.

Why the two are the same kernel: the pipeline hands out stages round-robin in acquire and
wait order, so tile p lands in stage p and tile k is read from stage k % S, exactly the
ring's explicit indices (checked numerically on the IR's index expressions).  The ring
commits a (zero-filled) group for tiles past the end so its wait counts hold; the
pipeline guards those copies instead, so every acquired stage is waited for and nothing
is in flight at exit.  The `syncthreads()` after the wait stays: it is what proves every
warp finished reading the stage refilled next.

cp.async -> TMA needs an arch with TMA (a kernel on an older arch is retargeted to
sm_90a); TMA -> cp.async retargets to sm_80 when nothing else in the kernel needs sm_90
(no wgmma, no setmaxnreg).  Any other shape: `applies` returns None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cake_core.diagnostics.model import TextEdit
from cake_core.hardware import Feature, get_arch
from cake_core.ir.kernel import Kernel
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_tactics.kernel_text import header_text, indent, indent_of, lines_span
from cake_tactics.ring_checks import Copy
from cake_tactics.rings import Ring, find_ring

ROLE = "main"
TMA_ARCH, CP_ASYNC_ARCH = "sm_90a", "sm_80"
#: Ops the TMA form's compute may not hold when it goes back to sm_80.
SM90_ONLY = frozenset({Feature.TMA, Feature.WGMMA, Feature.SETMAXNREG, Feature.MBARRIER_TX,
                       Feature.CLUSTERS})


# --- text ---------------------------------------------------------------------------------
def _to_tma(ring: Ring, source: SourceFile) -> list[str]:
    step = "    "
    out = [s.text for s in ring.decls]
    out.append(f'{ring.pipe} = pipeline(stages={ring.stages_text}, producer="{ROLE}", '
               f'consumer="{ROLE}")')
    out.append(f'with role("{ROLE}", warps=range(0, {ring.kernel.warps})):')
    out += [indent(s.text, step) for s in ring.pre]

    def fill(copies: list[Copy], var: str, depth: int) -> list[str]:
        pad = step * depth
        lines = [f"{pad}if {var} < {ring.trips}:",
                 f"{pad}{step}{ring.fill} = {ring.pipe}.acquire()"]
        for c in copies:
            lines.append(indent(c.stmt.lead + f"tma_load({c.buffer}[{ring.fill}], {c.src}, "
                                f"{ring.pipe})", pad + step))
        lines.append(f"{pad}{step}{ring.pipe}.commit()")
        return lines

    out.append(indent(ring.prologue.lead + header_text(source, ring.prologue.node), step))
    out += fill(ring.prologue_copies, ring.prologue_var, 2)
    out.append(indent(ring.main.lead + header_text(source, ring.main.node), step))
    out.append(f"{step * 2}{ring.stage} = {ring.pipe}.wait()")
    out.append(indent(ring.sync.text, step * 2))
    out += [indent(s.text, step * 2) for s in ring.ints]
    out += fill(ring.refill, ring.nxt, 2)
    out += [indent(s.text, step * 2) for s in ring.compute]
    out.append(f"{step * 2}{ring.pipe}.release()")
    out += [indent(s.text, step) for s in ring.post]
    return out


def _to_cp_async(ring: Ring, source: SourceFile) -> list[str]:
    step = "    "
    out = [s.text for s in ring.decls]
    out += [s.text for s in ring.pre]

    def copies(cs: list[Copy], index: str, depth: int) -> list[str]:
        pad = step * depth
        lines = [indent(c.stmt.lead + f"cp_async({c.buffer}[{index}], {c.src})", pad)
                 for c in cs]
        lines.append(f"{pad}cp_async_commit()")
        return lines

    out.append(ring.prologue.lead + header_text(source, ring.prologue.node))
    out += copies(ring.prologue_copies, ring.prologue_var, 1)
    out.append(ring.main.lead + header_text(source, ring.main.node))
    out.append(f"{step}cp_async_wait({_minus(ring.stages_text, 2)})")
    out.append(indent(ring.sync.text, step))
    out += [indent(s.text, step) for s in ring.ints]
    out += copies(ring.refill, f"{ring.nxt} % {_atom(ring.stages_text)}", 1)
    out.append(f"{step}{ring.stage} = {ring.k} % {_atom(ring.stages_text)}")
    out += [indent(s.text, step) for s in ring.compute]
    out.append("cp_async_wait(0)")
    out += [s.text for s in ring.post]
    return out


def _atom(text: str) -> str:
    return text if text.isidentifier() or text.isdigit() else f"({text})"


def _minus(text: str, n: int) -> str:
    return str(int(text) - n) if text.isdigit() else f"{text} - {n}"


def _render(ring: Ring, source: SourceFile, arch: str) -> tuple[TextEdit, ...]:
    blocks = _to_tma(ring, source) if ring.form == "cp_async" else _to_cp_async(ring, source)
    unit = indent_of(source.line_text(ring.body[0].node.span.start.line))
    start, end = lines_span(source, ring.body)
    edits = [TextEdit(source.span(start, end), "\n".join(indent(b, unit) for b in blocks))]
    k = ring.kernel
    if arch != k.arch:
        if k.arch_span is None:
            return ()
        edits.append(TextEdit(k.arch_span, f'"{arch}"'))
    return tuple(edits)


# --- the tactic ---------------------------------------------------------------------------
def _target_arch(ring: Ring) -> str | None:
    """Where the rewritten kernel runs: its own arch when that has what the new copies
    need, else the reference arch of the other form (None: cannot go there soundly)."""
    spec = get_arch(ring.kernel.arch)
    if spec is None:
        return None
    if ring.form == "cp_async":
        return ring.kernel.arch if Feature.TMA in spec.features else TMA_ARCH
    for op in ring.kernel.ops():
        if op.name in ("tma_load", "acquire", "commit", "wait", "release", "pipeline"):
            continue
        if op.prim.requires & SM90_ONLY:
            return None
    return CP_ASYNC_ARCH


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    ring = find_ring(kernel, source)
    if ring is None:
        return None
    arch = _target_arch(ring)
    if arch is None:
        return None
    if ring.form == "cp_async":
        where = "" if arch == kernel.arch else f" (retargeted to {arch})"
        return (f"a {ring.stages}-stage cp.async ring: TMA{where} moves each tile with one "
                "instruction and a pipeline tracks the stages")
    return (f"a {ring.stages}-stage TMA ring in one role: on {arch} the same ring runs on "
            "cp.async")


def _variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    ring = find_ring(kernel, source)
    arch = _target_arch(ring) if ring is not None else None
    if ring is None or arch is None:
        return []
    return [{"to": "tma" if ring.form == "cp_async" else "cp_async", "arch": arch}]


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    ring = find_ring(kernel, source)
    arch = _target_arch(ring) if ring is not None else None
    if ring is None or arch is None:
        return None
    want = "tma" if ring.form == "cp_async" else "cp_async"
    if params.get("to", want) != want or params.get("arch", arch) != arch:
        return None
    edits = _render(ring, source, arch)
    done = verified_rewrite(kernel, source, edits) if edits else None
    if done is None:
        return None
    out = {"to": want, "arch": arch, "predicted": done[1]}
    if want == "tma":
        why = f"cp.async -> TMA on {arch}: one copy instruction per tile, stages tracked by " \
              f"pipeline `{ring.pipe}`"
    else:
        why = f"TMA -> cp.async on {arch}: the ring's stages indexed explicitly, copies " \
              "waited with cp_async_wait"
    return TacticResult(edits, why, out)


ASYNC_COPY = Tactic(
    "async-copy",
    "Switch a copy ring between cp.async (sm_80) and TMA with a pipeline (sm_90a).",
    _applies, _apply, _variants,
    Provenance("hand-written", "2026-12-02", ("examples/gemm_sm80.cake",)))
