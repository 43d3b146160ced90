"""The lowering learns what it needs from facets, traits and effects, not from names.

Register layouts come from each op's `layouts(op, ctx)` hook; pipeline transaction
bytes from the producer's pipeline steps and copies that arrive with `tx_bytes`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import check_text, default_plugins
from cake_core.elab.bindings import bindings_of
from cake_core.lower.plan import build_plan
from cake_core.primitives.facets import Unsupported
from cake_core.primitives.registry import PipeAction, Primitive
from cake_core.primitives.traits import Trait

ROOT = Path(__file__).resolve().parents[2]

#: Traits of ops whose register layout the lowering must infer from the op itself.
_LAYOUT_TRAITS = {Trait.ELEMENTWISE, Trait.ROW_REDUCTION, Trait.MMA, Trait.ALLOCATES_FRAGMENT}
_CONSTRAINED = [p for p in default_plugins().registry.all() if p.traits & _LAYOUT_TRAITS]


def test_the_layout_constrained_primitives_are_found() -> None:
    names = {p.name for p in _CONSTRAINED}
    assert {"add", "cast", "row_argmin", "wgmma", "mma_sync", "fragment"} <= names


@pytest.mark.parametrize("prim", _CONSTRAINED, ids=[f"{p.plugin}:{p.key}" for p in _CONSTRAINED])
def test_a_layout_constrained_primitive_states_its_layouts(prim: Primitive) -> None:
    facet = prim.facet("lower")
    if isinstance(facet, Unsupported):
        return
    assert callable(getattr(facet, "layouts", None)), \
        f"{prim.plugin}:{prim.key}: its lower facet has no layouts(op, ctx) hook, so the " \
        "layout inference would give its fragments the generic layout"


def test_an_acquire_announces_the_bytes_of_the_copies_into_its_pipeline() -> None:
    text = (ROOT / "examples" / "kmeans_assign_sm90.cake").read_text(encoding="utf-8")
    res = check_text(text, "k.cake")
    k = res.program.kernels[0]
    plan = build_plan(k, bindings_of(k, res.parse.module))
    acquires = [op for op in k.ops() if op.prim.effects.pipe_action is PipeAction.ACQUIRE]
    assert len(acquires) == 1
    # two (1, 128, 64) bf16 boxes and one (1, 128) f32 box; the copies of the X tile go to
    # a raw mbarrier armed by expect_tx and are not counted
    assert plan.tx_bytes == {id(acquires[0]): 2 * 128 * 64 * 2 + 128 * 4}
