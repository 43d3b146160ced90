"""The kernels the tactic tests rewrite and the variants each tactic offers on them
(imported as `tactics_support`), shared by the verification and the emulation tests so both
cover exactly the same rewrites."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.plugins import Tactic

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.cake"))
#: Kernels written for the structural tactics (forms no example has any more).
TEST_KERNELS = sorted((Path(__file__).resolve().parent / "data").glob("*.cake"))
KERNELS = EXAMPLES + TEST_KERNELS


@dataclass(frozen=True)
class Variant:
    """One rewrite a tactic offered: its parameters, its output and the new text."""

    params: dict[str, Any]
    out: Any
    text: str


def checked(path: Path) -> tuple[str, Any]:
    """The kernel's text and its check result (which must have no error)."""
    text = path.read_text(encoding="utf-8")
    res = check_text(text, path.name)
    assert res.errors == [], [d.message for d in res.errors]
    return text, res


def applies(tactic: Tactic, path: Path) -> bool:
    _, res = checked(path)
    return tactic.applies(res.program.kernels[0], res.source) is not None


def offered_variants(tactic: Tactic, path: Path) -> Iterator[Variant]:
    """Every variant `tactic` offers on the first kernel of `path`: the variants it would
    refuse (one that would not verify is never offered) are left out."""
    text, res = checked(path)
    kernel = res.program.kernels[0]
    if tactic.applies(kernel, res.source) is None:
        return
    for params in tactic.variants(kernel, res.source):
        out = tactic.apply(kernel, res.source, params)
        if out is not None:
            yield Variant(dict(params), out, apply_edits(text, out.edits))
