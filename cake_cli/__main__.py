"""`python -m cake_cli`: the `cake` command."""

from cake_cli.main import main

main(prog_name="cake")
