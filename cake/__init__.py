"""`python -m cake`: the `cake` command for an interpreter whose scripts are not on PATH.

Editors start the language server as `<python> -m cake lsp`, which needs no console
script.  The command itself lives in `cake_cli`.
"""
