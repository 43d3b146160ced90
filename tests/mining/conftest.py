"""The mining tests: synthetic runs stores for clusters, ledger and promotion; one real
agent run loop (test_promotion_loop.py) with a scripted model."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
