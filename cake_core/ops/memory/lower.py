"""Lower facets of allocations and views.

Buffers are byte offsets into the dynamic shared memory (`SMEM_<NAME>_OFFSET`, from the
verifier's smem plan), so `smem(...)` itself emits only a comment.  Barriers are shared
addresses; one thread initialises them where they are declared.  Tiles are descriptions:
`A.tile(...)` records the tile for the copies that use it and emits nothing.
"""

from __future__ import annotations

from cake_core.ir.kernel import Op
from cake_core.ir.types import (
    BarrierType,
    FragmentType,
    IntType,
    NoneType,
    PipelineType,
    ScalarType,
    SmemType,
)
from cake_core.lower import layout_rules
from cake_core.lower.context import LowerContext, float_literal
from cake_core.lower.emitter import c_identifier
from cake_core.lower.layout_rules import with_layouts


def smem(op: Op, ctx: LowerContext) -> str:
    t = op.results[0].type
    assert isinstance(t, SmemType)
    name = t.buffer
    p = ctx.smem.get(name)
    where = f"bytes [{p.offset}, {p.end})" if p is not None else "no placement"
    return f"// `{name}`: {t.describe()} at {ctx.smem_names.get(name, '?')}, {where}"


@with_layouts(layout_rules.declared)
def fragment(op: Op, ctx: LowerContext) -> str:
    t = op.results[0].type
    assert isinstance(t, FragmentType)
    fv, decl = ctx.define(op, 0)
    fill = op.args.get("fill")
    if fill is not None and isinstance(fill.type, NoneType):
        # no clearing moves: a wgmma with scale-d 0 writes it first (CK335 checks that)
        return f"{decl}// `{t.describe()}` left unfilled (fill=None)".rstrip()
    if fv.dist.opaque:
        value = "0u"
    elif fill is None:
        value = _zero(fv.ctype)
    elif isinstance(fill.type, ScalarType) and isinstance(fill.const, float):
        lit = float_literal(fill.const)
        value = lit if fv.ctype == "float" else f"cake_cvt<{fv.ctype}>({lit})"
    elif isinstance(fill.type, IntType) and fill.sym is not None and fill.sym.const is not None:
        c = fill.sym.const
        value = _zero(fv.ctype) if c == 0 else (
            float_literal(float(c)) if fv.ctype == "float" else
            str(c) if fv.ctype in ("int", "uint32_t", "int8_t") else
            f"cake_cvt<{fv.ctype}>({float_literal(float(c))})")
    else:
        v = ctx.scalar(fill)
        value = v if fv.ctype in ("int", "uint32_t", "int8_t", "float") else \
            f"cake_cvt<{fv.ctype}>(cake_f32({v}))"
    r = ctx.loop_var("r")
    return f"{decl}CAKE_FOR({r}, {fv.size}) {fv.cname}[{r}] = {value};"


def _zero(ctype: str) -> str:
    return {"float": "0.0f", "int": "0", "uint32_t": "0u", "int8_t": "0",
            "bool": "false"}.get(ctype, f"{ctype}{{}}")


def pipeline(op: Op, ctx: LowerContext) -> str:
    t = op.results[0].type
    assert isinstance(t, PipelineType)
    info = ctx.plan.pipes[t.name]
    names = ctx.pipe_names[t.name]
    st = ctx.loop_var("st")
    init = (f"CAKE_FOR({st}, {t.stages}) {{ cake_mbar_init({names['full']} + 8 * {st}, "
            f"{info.full_count}); cake_mbar_init({names['empty']} + 8 * {st}, "
            f"{info.empty_count}); }}")
    who = "threadIdx.x == 0" if op.role is None else "leader"
    ctx.features.add("mbarrier")
    return (f"// `{t.name}`: {t.stages} stages, {t.producer} -> {', '.join(t.consumers)}; "
            f"full barriers expect {info.full_count} arrival(s), empty barriers "
            f"{info.empty_count}\n"
            f"const uint32_t {names['full']} = smem_u32 + {ctx.smem_names[t.name]}, "
            f"{names['empty']} = {names['full']} + {8 * t.stages};\n"
            f"if ({who}) {init}")


def mbarrier(op: Op, ctx: LowerContext) -> str:
    t = op.results[0].type
    assert isinstance(t, BarrierType)
    name = ctx.barrier_names[t.name]
    who = "threadIdx.x == 0" if op.role is None else "leader"
    ctx.features.add("mbarrier")
    if t.n == 1:
        init = f"cake_mbar_init({name}, {t.count});"
    else:
        i = ctx.loop_var("bi")
        init = f"CAKE_FOR({i}, {t.n}) cake_mbar_init({name} + 8 * {i}, {t.count});"
    return (f"const uint32_t {name} = smem_u32 + {ctx.smem_names[t.name]};\n"
            f"if ({who}) {init}")


def tensor_tile(op: Op, ctx: LowerContext) -> str:
    ctx.note_tile(op)
    return ""


def smem_tile(op: Op, ctx: LowerContext) -> str:
    return ""  # views are placed by the view tracer where they are used


__all__ = ["c_identifier", "fragment", "mbarrier", "pipeline", "smem", "smem_tile",
           "tensor_tile"]
