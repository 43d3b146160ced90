"""`python -m cake_lsp`: the same as `cake lsp`."""

import sys

from cake_lsp.server import main

sys.exit(main())
