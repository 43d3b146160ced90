"""Synthetic .cake files of a given size for the benchmarks: many copies of one kernel."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "bench" / "data" / "gemm_sm90_block.cake"


def synthetic(lines: int) -> str:
    """A valid .cake file of about `lines` lines: the header, then renamed kernels."""
    text = SEED.read_text(encoding="utf-8")
    header, _, body = text.partition("# --- kernel ---\n")
    out = [header]
    n = 0
    while sum(s.count("\n") for s in out) < lines:
        out.append(body.replace("def gemm(", f"def gemm_{n}("))
        n += 1
    return "".join(out)


def dense(lines: int) -> str:
    """One kernel of about `lines` lines: the seed kernel with its epilogue store repeated.

    The stress case of nodes per line (each store is 17 AST nodes) and of a single long
    kernel, where nothing can be reused between kernels.
    """
    text = SEED.read_text(encoding="utf-8").rstrip("\n")
    store = text.rsplit("\n", 1)[1]
    have = text.count("\n") + 1
    return text + "\n" + "\n".join([store] * max(0, lines - have)) + "\n"
