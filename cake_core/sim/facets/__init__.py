"""Simulate facets of the built-in primitives, one module per primitive family.

Each primitive names its facet explicitly (`Facets(simulate=Lazy(...))` in
`cake_core/primitives/<family>.py`).  The calling convention, `facet(op, ctx)`, is in
`cake_core.sim` (the package docstring).
"""
