"""Lower facets of the built-in primitives, one module per family.

Each primitive names its facet explicitly (`facets=_FACETS.of("tma_load")` in its family
module); a facet maps `(op, ctx)` to the C++ code of that op: usually one line, which
`#line` ties to the op's .cake line.  A facet whose op constrains register layouts carries
a `layouts(op, ctx)` hook (`layout_rules.with_layouts`).  Facets of plugin primitives have
the same signature and the same hook.
"""
