"""The primitive API: how an op of the IR is declared and what analyses may ask of it.

`registry` (`Primitive`, `EffectSpec`, `Registry`), `facets` (`Facets`, `Lazy`,
`Unsupported`), `traits` (`Trait`) and `typecheck` (the `CallContext` a type rule sees).
The built-in primitives themselves are declared with this API in `cake_core/ops/`.
"""
