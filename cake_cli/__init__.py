"""The `cake` command line, above the libraries it drives.

`cake_cli.main` holds the command group and the commands that only check and explain
(`check`, `explain`, `lsp`, `rules`); `cake_cli.commands` holds one module per other
command, imported when that command is used.  The compiler (`cake_core`) knows nothing of
this package, the language server or the agents.
"""
