"""Lower facets of the built-in primitives, one module per family.

Each primitive names its facet explicitly (`Facets(lower=Lazy(...))` in
`cake_core/primitives/<family>.py`); a facet maps `(op, ctx)` to the C++ code of that op:
usually one line, which `#line` ties to the op's .cake line.  Facets of plugin primitives
have the same signature.
"""
