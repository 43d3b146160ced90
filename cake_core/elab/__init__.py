"""Elaboration: from the syntax tree to the typed IR, type-checking as it builds.

`builder` walks a module's kernels; `expressions` and `forms` evaluate expressions and the
compile-time forms; `signature` reads a kernel's decorator and parameters; `calls` binds
arguments to a primitive's parameters; `scope` holds the built-in names.
"""
