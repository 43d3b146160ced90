"""Every built-in primitive can be simulated: its simulate facet resolves to a callable.

A primitive added without its simulator semantics fails here, not when a kernel that
uses it is first simulated.
"""

from __future__ import annotations

import pytest

from cake_core.primitives.registry import Primitive, builtin_registry

PRIMS = builtin_registry().all()


@pytest.mark.parametrize("prim", PRIMS, ids=[p.key for p in PRIMS])
def test_simulate_facet_resolves(prim: Primitive) -> None:
    fn = prim.facet("simulate")
    assert callable(fn), (f"`{prim.key}` has no simulate facet: add "
                          f"cake_core/sim/facets/{prim.family}.py:{prim.facet_attr}")


def test_facet_modules_define_nothing_orphaned() -> None:
    """Each public function of a facet module belongs to a built-in primitive."""
    import importlib
    import inspect

    attrs = {(p.family, p.facet_attr) for p in PRIMS}
    for fam in {p.family for p in PRIMS}:
        mod = importlib.import_module(f"cake_core.sim.facets.{fam}")
        for name, obj in vars(mod).items():
            if name.startswith("_") or not callable(obj) or inspect.isclass(obj):
                continue
            if getattr(obj, "__module__", mod.__name__) != mod.__name__:
                continue
            assert (fam, name) in attrs, f"cake_core.sim.facets.{fam}.{name} simulates nothing"
