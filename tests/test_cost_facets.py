"""The cost facets return well-formed records on the examples (their presence and
signatures are checked for every primitive in tests/test_facets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.cost.model import cost_context
from cake_core.cost.record import CostRecord

ROOT = Path(__file__).resolve().parent.parent


def _examples() -> list[Path]:
    return sorted((ROOT / "examples").glob("*.cake"))


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.name)
def test_facets_return_records_on_the_examples(path: Path) -> None:
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    assert not res.errors
    for k in res.program.kernels:
        ctx = cost_context(k, {d: 64 for d in k.dims})
        seen = 0
        for op in k.ops():
            rec = op.prim.facet("cost")(op, ctx)
            assert isinstance(rec, CostRecord)
            assert rec.smem_read >= 0 and rec.smem_write >= 0 and rec.cuda_ops >= 0
            assert all(a.bytes >= 0 for a in (*rec.reads, *rec.writes))
            seen += 1
        assert seen > 0
