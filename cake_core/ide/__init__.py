"""Editor queries over one checked file: what a name means, where it is defined and used.

The language server (and any other tool that points at source: an agent's repair step, a
refactoring tactic) asks these questions with byte offsets and gets back spans and IR
values; it never walks the AST or the IR itself.

Everything here is read-only and tolerant: it works on the AST of a file with syntax
errors and on a partial `Program`, so hovers and completion keep working while the user
types.

- `index`: the symbol index of a parsed file (definitions, references, call sites, the
  scopes a cursor sees), built once per check and queried by position.
- `cursor`: queries on the text just before the cursor (the receiver of a dot and what
  may follow it, the call being written), which is code the parser has not seen whole.
- `forms`: the signatures of the builder forms (`range`, `role`, `cdiv`, ...), which the
  compiler evaluates itself and so have no registry entry.
"""
