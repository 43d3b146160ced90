"""The CAKE language server: `cake lsp` (entry point `cake_lsp.server:main`)."""
