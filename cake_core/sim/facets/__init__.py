"""Simulate facets of the built-in primitives, one module per primitive family.

`Primitive.facet("simulate")` finds `cake_core.sim.facets.<family>:<attr>` (attr: the
primitive's name, or `<receiver>_<name>` for methods).  The calling convention is in
`cake_core.sim` (the package docstring).
"""
