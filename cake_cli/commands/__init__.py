"""The `cake` commands that live in their own modules, imported by `cake_cli.main` only
when used."""
