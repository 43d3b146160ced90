"""Lower facets of the built-in primitives, one module per family.

Each function is found by name through `Primitive.facet("lower")`
(`cake_core.lower.facets.<family>:<name>`, or `<receiver>_<name>` for methods) and maps
`(op, ctx)` to the C++ code of that op: usually one line, which `#line` ties to the op's
.cake line.  Facets of plugin primitives have the same signature.
"""
