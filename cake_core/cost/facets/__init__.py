"""Cost facets of the built-in primitives, one module per family.

Each primitive names its facet explicitly (`Facets(cost=Lazy("cake_core.cost.facets.mma:wgmma"),
...)` in `cake_core/primitives/<family>.py`); a facet maps `(op, ctx)` to the `CostRecord` of
one execution of the op by one block.
"""
