"""Elaboration: from the syntax tree to the typed IR, type-checking as it builds.

`builder` walks a module's kernels and `kernel_builder` a kernel's statements, with the
checks that need a finished kernel in `kernel_checks`; the `Evaluator` that turns an
expression into a value is layered `forms` < `views` (attributes, subscripts, view
origins) < `application` (calls, primitive application) < `operators` (folding,
predicates, operator primitives) < `expressions` (names, literals, dispatch); `signature`
reads a kernel's decorator and parameters; `calls` binds arguments to a primitive's
parameters; `scope` holds the built-in names; `state` the protocols the builders share;
`bindings` reads op result names back from the syntax tree.
"""
