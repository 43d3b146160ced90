"""Makes `lsp_support` (the helpers shared by the language-server tests) importable:
the suite runs in importlib import mode, where test modules cannot import each other."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
