"""Every op of the IR, one module per family, each primitive with all its facets."""
