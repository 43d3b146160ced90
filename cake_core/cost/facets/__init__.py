"""Cost facets of the built-in primitives, one module per family.

Each function is found by name through `Primitive.facet("cost")`
(`cake_core.cost.facets.<family>:<name>`, or `<receiver>_<name>` for methods) and maps
`(op, ctx)` to the `CostRecord` of one execution of the op by one block.
"""
