"""Every registered primitive, built-in or plugin, names all its facets, and each is usable.

A facet is usable when it resolves to a callable taking `(op, ctx)` or is an explicit
`Unsupported(why)`.  A primitive added without its cost, simulation or lowering fails
here, not when a kernel that uses it is first priced, simulated or lowered.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

from cake_core.check import default_plugins
from cake_core.hardware import ARCHES
from cake_core.ir.types import NoneType, PipelineType
from cake_core.primitives.facets import (
    FACET_KINDS,
    FacetError,
    FacetKind,
    Facets,
    Lazy,
    Unsupported,
    check_facet,
)
from cake_core.primitives.registry import (
    EffectSpec,
    PipeAction,
    Primitive,
    SmemAccess,
    builtin_registry,
)
from cake_core.primitives.traits import Trait

#: Every primitive the installed plugins register, built-ins first.
ALL = default_plugins().registry.all()
BUILTIN = builtin_registry().all()


@pytest.mark.parametrize("prim", ALL, ids=[f"{p.plugin}:{p.key}" for p in ALL])
def test_primitive_facets_are_complete_and_well_typed(prim: Primitive) -> None:
    assert isinstance(prim.facets, Facets), f"{prim.key}: facets must be a Facets object"
    for kind in FACET_KINDS:
        problem = check_facet(prim.facets.ref(kind))
        assert problem is None, f"{prim.plugin}:{prim.key} {kind} facet: {problem}"
    params = [p for p in inspect.signature(prim.type_rule).parameters.values()
              if p.default is p.empty]
    assert len(params) == 1, f"{prim.key}: a type rule takes (ctx)"
    assert isinstance(prim.effects, EffectSpec)
    assert all(isinstance(t, Trait) for t in prim.traits), prim.traits
    lacking = [a for a, spec in ARCHES.items() if not spec.features.issuperset(prim.requires)]
    if lacking:
        assert prim.unsupported.strip(), (
            f"{prim.key} is unsupported on {', '.join(lacking)}: say why and what to use "
            "instead in `unsupported=`")


@pytest.mark.parametrize("prim", ALL, ids=[f"{p.plugin}:{p.key}" for p in ALL])
def test_effects_and_traits_name_the_primitives_own_parameters(prim: Primitive) -> None:
    """The analyses look these parameters up on every op without checking the name."""
    spec, names = prim.effects, {p.name for p in prim.params}
    accessed = [arg for arg, _ in spec.smem_access]
    for arg in (*spec.reads, *spec.writes, *accessed, spec.global_tile):
        assert arg is None or arg in names, f"{prim.key}: no parameter {arg!r}"
    if spec.pipe_action is not None:
        assert prim.receiver is PipelineType and "self" in (spec.arrives, spec.waits), prim.key
    if Trait.TMA_COPY in prim.traits:
        assert spec.global_tile is not None, f"{prim.key}: a TMA copy names its global tile"
        assert (SmemAccess.TMA in {k for _, k in spec.smem_access}), prim.key
    if Trait.WARPGROUP_MMA in prim.traits:
        assert Trait.MMA in prim.traits and {"acc", "a", "b"} <= names, prim.key


def test_pipeline_methods_declare_each_protocol_step_once() -> None:
    steps = [p.effects.pipe_action for p in BUILTIN if p.effects.pipe_action is not None]
    assert sorted(s.value for s in steps) == sorted(a.value for a in PipeAction)


def _referenced(kind: FacetKind) -> set[str]:
    return {ref.target for p in BUILTIN
            if isinstance(ref := p.facets.ref(kind), Lazy)}


@pytest.mark.parametrize("kind", FACET_KINDS)
def test_facet_modules_define_nothing_orphaned(kind: FacetKind) -> None:
    """Each public function of a built-in facet module is some primitive's facet."""
    used = _referenced(kind)
    modules = {t.partition(":")[0] for t in used}
    assert modules, f"no built-in {kind} facet is a Lazy reference"
    for name in sorted(modules):
        mod = importlib.import_module(name)
        for attr, obj in vars(mod).items():
            if attr.startswith("_") or not callable(obj) or inspect.isclass(obj):
                continue
            if getattr(obj, "__module__", name) not in (name, None):
                continue  # imported helpers
            assert f"{name}:{attr}" in used, f"{name}.{attr} is no primitive's {kind} facet"


def _op_ctx(op: Any, ctx: Any) -> None:
    return None


def _ctx_op(ctx: Any, op: Any) -> None:
    return None


def _one(op: Any) -> None:
    return None


@pytest.mark.parametrize(("ref", "problem"), [
    (_op_ctx, None),
    (Unsupported("needs a cluster launch"), None),
    (_ctx_op, "takes (ctx, op); a facet takes (op, ctx)"),
    (_one, "takes (op); a facet takes (op, ctx)"),
    (Unsupported("  "), "Unsupported() without a reason"),
    (Lazy("cake_core.ops.mma.sim:no_such_facet"), "has no 'no_such_facet'"),
    (Lazy("cake_core.no_such_module:x"), "cannot import"),
    (Lazy("no_colon"), "is not 'module:attr'"),
    (Lazy("cake_core.ops.mma.sim:__doc__"), "not callable"),
])
def test_check_facet_names_each_defect(ref: Any, problem: str | None) -> None:
    got = check_facet(ref)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


def test_a_broken_reference_raises_instead_of_reading_as_absent() -> None:
    broken = Facets(cost=Unsupported("x"), simulate=Lazy("cake_core.ops.mma.sim:nope"),
                    lower=Unsupported("x"))
    prim = Primitive("broken", "math", (), lambda ctx: NoneType(), "A broken primitive.",
                     facets=broken, plugin="test")
    with pytest.raises(FacetError, match="nope"):
        prim.facet("simulate")
    assert isinstance(prim.facet("cost"), Unsupported)


def test_primitive_cannot_be_declared_without_facets() -> None:
    with pytest.raises(TypeError, match="facets"):
        Primitive("bare", "math", (), lambda ctx: NoneType(), "No facets.")  # type: ignore[call-arg]
