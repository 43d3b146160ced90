"""Syntax-error recovery in long files stays local and exact.

The flaw scan covers only the top-level statements around tree-sitter's errors, and the
repaired text is parsed incrementally from the erroneous tree.  Both are shortcuts of a
whole-file scan and a fresh parse; these tests hold them to the same answers on one-byte
mutations of the examples (seeded, so a failure reproduces).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tree_sitter import Node as TSNode

from cake_core.source import SourceFile
from cake_core.syntax.parser import _parse_repaired, _parser, parse
from cake_core.syntax.recovery import apply_repairs, error_ranges, find_repairs

ROOT = Path(__file__).resolve().parents[1]
TEXT = b"\n\n".join(p.read_bytes() for p in sorted((ROOT / "examples").glob("*.cake")))
BYTES = [b":", b"(", b")", b"[", b"]", b'"', b"'", b"x", b"\n", b" ", b"{", b'"""', b"\r\n"]


def mutants(seed: int, count: int) -> list[bytes]:
    """`count` one-byte insertions or deletions of the examples that tree-sitter rejects."""
    rng = random.Random(seed)
    out: list[bytes] = []
    while len(out) < count:
        at = rng.randrange(len(TEXT))
        if rng.random() < 0.5:
            data = TEXT[:at] + TEXT[at + 1 :]
        else:
            data = TEXT[:at] + rng.choice(BYTES) + TEXT[at:]
        if _parser().parse(data).root_node.has_error:
            out.append(data)
    return out


def flat(node: TSNode) -> list[tuple[str, int, int, bool]]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append((n.type, n.start_byte, n.end_byte, n.is_missing))
        stack.extend(n.children)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_scanning_around_the_errors_finds_what_a_whole_file_scan_finds(seed: int) -> None:
    for data in mutants(seed, 60):
        root = _parser().parse(data).root_node
        errors = error_ranges(root)
        whole = [(f.kind, f.message, f.start, f.end) for f in find_repairs(data, errors)]
        local = [(f.kind, f.message, f.start, f.end) for f in find_repairs(data, errors, root)]
        assert local == whole, data


@pytest.mark.parametrize("seed", range(3))
def test_the_repaired_text_parses_incrementally_as_it_parses_afresh(seed: int) -> None:
    repaired_clean = 0
    for data in mutants(100 + seed, 60):
        tree = _parser().parse(data)
        flaws = find_repairs(data, error_ranges(tree.root_node), tree.root_node)
        if not flaws:
            continue
        repaired, patches = apply_repairs(data, flaws)
        fresh = _parser().parse(repaired).root_node
        repaired_clean += not fresh.has_error
        assert flat(_parse_repaired(tree, data, repaired, patches)) == flat(fresh)
    assert repaired_clean > 0  # the incremental path itself was exercised


def test_an_error_in_the_last_kernel_of_a_long_file_is_found_and_repaired() -> None:
    text = TEXT.decode()
    at = text.rindex("    for ")  # a loop header in the last kernel
    broken = text[:at] + text[at:].replace(":\n", "\n", 1)
    res = parse(SourceFile(broken, "long.cake"))
    assert [d.code for d in res.diagnostics] == ["CK001"]
    assert res.diagnostics[0].message.startswith("expected `:` at the end of the `for` line")
    assert res.diagnostics[0].fixes and res.diagnostics[0].fixes[0].edits[0].new_text == ":"
    # the rest of the file kept its statements: as many kernels as without the error
    clean = parse(SourceFile(text, "long.cake"))
    assert len(res.module.body) == len(clean.module.body)
