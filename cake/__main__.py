"""`python -m cake ARGS`: the same as `cake ARGS`."""

from cake_cli.main import main

main(prog_name="cake")
