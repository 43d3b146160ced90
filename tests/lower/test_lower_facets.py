"""Every built-in primitive has a lower facet, found by the naming convention."""

from __future__ import annotations

import pytest

from cake_core.primitives.registry import Primitive, builtin_registry


@pytest.mark.parametrize("prim", builtin_registry().all(), ids=lambda p: p.key)
def test_every_builtin_primitive_has_a_lower_facet(prim: Primitive) -> None:
    facet = prim.facet("lower")
    assert callable(facet), f"{prim.key}: no cake_core.lower.facets.{prim.family}:" \
                            f"{prim.facet_attr}"
