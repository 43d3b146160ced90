"""CAKE: a typed, hardware-explicit GPU kernel IR and its compiler.

Data flows one way: text -> AST (`cake_core.syntax`) -> typed IR (`cake_core.ir`) ->
diagnostics / simulation / cost / CUDA.  Nothing here imports the language server or
the agents.
"""

__version__ = "0.1.0"
