"""Text -> AST: the tree-sitter front end.  Nothing in here ever executes user text."""
