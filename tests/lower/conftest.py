"""Shared fixtures of the lowering tests: the examples, lowered once, and a private cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.lower import LowerResult, lower_source
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.cake"))


def read_example(path: Path) -> SourceFile:
    return SourceFile(path.read_text(encoding="utf-8"), f"examples/{path.name}")


@pytest.fixture(scope="session")
def lowered_examples() -> dict[str, LowerResult]:
    """Every example lowered once per session, by file stem."""
    return {p.stem: lower_source(read_example(p)) for p in EXAMPLES}


@pytest.fixture(scope="session")
def example_sources() -> dict[str, SourceFile]:
    return {p.stem: read_example(p) for p in EXAMPLES}
