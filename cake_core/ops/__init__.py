"""The built-in primitive families, one package each: a family's declarations
(`__init__.py`: parameters, type rules, effects, traits, arch support, docs) and its
cost, simulate and lower facets (`cost.py`, `sim.py`, `lower.py`), which the
declarations name with `Lazy` references.

Like a plugin, this layer sits above the analyses whose contexts its facets use;
the registry finds the families by name (`primitives.registry.BUILTIN_FAMILIES`).
"""
