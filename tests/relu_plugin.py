"""cake-relu: a third-party primitive, `relu(x)`, declared in one module with all its facets.

The type rule runs on every `cake check`; the cost, simulate and lower facets run only when
a kernel is priced, simulated or lowered, so they import what they need when they run and
`cake check` loads none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cake_core.diagnostics import codes
from cake_core.ir.types import FragmentType, Type
from cake_core.plugins import Plugin
from cake_core.primitives.facets import Facets
from cake_core.primitives.registry import EffectSpec, Primitive, param
from cake_core.primitives.traits import Trait

if TYPE_CHECKING:
    from cake_core.cost.record import CostContext, CostRecord
    from cake_core.ir.kernel import Op
    from cake_core.lower.context import LowerContext
    from cake_core.lower.plan import LayoutContext
    from cake_core.primitives.typecheck import CallContext
    from cake_core.sim.context import SimContext
    from cake_core.sim.state import Fragment


def relu_type(ctx: CallContext) -> Type:
    """A floating-point fragment in, the same fragment type out."""
    x = ctx.type("x")
    if not isinstance(x, FragmentType) or not x.dtype.is_float:
        return ctx.error(codes.DTYPE_MISMATCH, f"relu takes a floating-point fragment, not {x}",
                         "x")
    return x


def relu_cost(op: Op, ctx: CostContext) -> CostRecord:
    """One CUDA-core operation per element, in every thread that holds a copy."""
    from cake_core.cost.record import CostRecord

    return CostRecord(cuda_ops=float(ctx.numel(op.args["x"].type) * ctx.replicas(op)))


def relu_simulate(op: Op, ctx: SimContext) -> Fragment:
    """`max(x, 0)` on the process's own registers, in the fragment's dtype."""
    import numpy as np

    from cake_core.sim.state import Fragment

    x = ctx.frag(op, "x")
    return Fragment(np.maximum(x.array, np.zeros((), x.array.dtype)), x.dtype)


class ReluLowering:
    """The lower facet (`__call__`) and the register layout it needs (`layouts`)."""

    def layouts(self, op: Op, ctx: LayoutContext) -> None:
        """The result is laid out like `x`, as for any element-wise op."""
        from cake_core.lower.layout_rules import elementwise

        elementwise(op, ctx)

    def __call__(self, op: Op, ctx: LowerContext) -> str:
        """One `fmaxf` per register, rounded back to 16 bits when `x` is bf16 or f16."""
        from cake_core.ir.types import DType
        from cake_core.lower.context import CTYPE
        from cake_core.lower.fragments import check_operand, frag_result, index, nest

        out, decl = frag_result(ctx, op)
        loop = nest(ctx, out.dist.loops)
        x = check_operand(ctx, op, "x", out.dist, out.shape)
        value = f"{x.cname}[{index(x.dist, loop)}]"
        if out.dtype == DType.F32:
            expr = f"fmaxf({value}, 0.0f)"
        else:
            expr = f"cake_cvt<{CTYPE[out.dtype]}>(fmaxf(cake_f32({value}), 0.0f))"
        return f"{decl}{loop.header}{out.cname}[{index(out.dist, loop)}] = {expr};"


RELU = Primitive(
    "relu", "math", (param("x", FragmentType, doc="a floating-point fragment"),), relu_type,
    "Element-wise `max(x, 0)` of a floating-point fragment.",
    effects=EffectSpec(reads=("x",)),
    traits=frozenset({Trait.THREAD_LOCAL, Trait.ELEMENTWISE, Trait.REGISTER_MATH}),
    facets=Facets(cost=relu_cost, simulate=relu_simulate, lower=ReluLowering()),
    plugin="cake-relu",
)

plugin = Plugin(name="cake-relu", version="0.1.0", primitives=(RELU,),
                description="relu(x): element-wise max(x, 0)")
