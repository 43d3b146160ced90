"""Verifier passes that misbehave, for the guard tests (loaded through
`CAKE_LSP_TEST_PASSES`; never imported by the server otherwise)."""

from __future__ import annotations

from cake_core.diagnostics.model import Diagnostic
from cake_core.ir.kernel import Program
from cake_core.source import SourceFile


def crash(program: Program, source: SourceFile) -> list[Diagnostic]:
    raise RuntimeError("this pass always fails")


def hang(program: Program, source: SourceFile) -> list[Diagnostic]:
    n = 0
    while True:  # stopped by the guard after its time limit
        n += 1


def not_a_list(program: Program, source: SourceFile) -> list[Diagnostic]:
    return "no diagnostics here"  # type: ignore[return-value]


def quiet(program: Program, source: SourceFile) -> list[Diagnostic]:
    return []
