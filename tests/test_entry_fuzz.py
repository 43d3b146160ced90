"""Property: every entry point answers any input with findings or a message, in bounded time.

`cake check`, `cake lower`, `cake cost` and `cake run --sim` get pathological inputs (the
crashes and hangs found so far, kept in tests/data/fuzz_regressions/, and inputs built
here: deep nesting, NUL bytes, invalid UTF-8, a BOM, CRLF and CR line endings, 10,000
kernels) and seeded random mutations of the examples.  Each must exit 0 or 1 (2 only
with a usage message), print no traceback and no internal error (CK9xx), and finish
within BOUND_S.  The parser's and the static gate's own fuzz tests are
tests/test_parser_fuzz.py and tests/test_check_fuzz.py; the long run is bench/fuzz_long.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_check_fuzz import SEED_TEXTS, TOKENS

from cake_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = sorted((ROOT / "tests" / "data" / "fuzz_regressions").glob("*.cake"))
GEMM = (ROOT / "examples" / "gemm_sm80.cake").read_bytes()
BOUND_S = 10.0
"""Per command; every input here takes well under 2 s on a quiet machine (see the
measurements in CHANGELOG.md), the rest is room for a busy one."""

SMALL_KERNEL = '@kernel(arch="sm_80", grid=(1,), warps=4)\ndef k{i}():\n    pass\n'

BUILT: dict[str, bytes] = {
    "pow_tower": b"X = 10**10**10\n",
    "parens_5000": b"X = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
    "sum_5000": b"X = " + b" + ".join([b"1"] * 5000) + b"\n",
    "nul": GEMM.replace(b"STAGES = 3", b"STAGES = 3\x00"),
    "invalid_utf8": GEMM.replace(b"STAGES = 3", b"STAGES = 3 \xff\xfe"),
    "bom": b"\xef\xbb\xbf" + GEMM,
    "crlf": GEMM.replace(b"\n", b"\r\n"),
    "cr_only": GEMM.replace(b"\n", b"\r"),
    "bom_crlf_nul": b"\xef\xbb\xbf" + GEMM.replace(b"\n", b"\r\n") + b"\x00\xff",
    "empty": b"",
}
CASES = {**{p.stem: p.read_bytes() for p in REGRESSIONS}, **BUILT}

COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "check": lambda f: ["check", "--no-color", f],
    "lower": lambda f: ["lower", "--no-color", "-o", f + ".cu", f],
    "cost": lambda f: ["cost", "-d", "M=4096,N=4096,K=4096", f],
    "sim": lambda f: ["run", "--sim", "--task", "gemm_f16_sm80", "--dims", "M=64,N=64,K=64",
                      "--schedules", "1", f],
}


def run_cli(tmp_path: Path, command: str, data: bytes) -> None:
    """Run one command on `data` and check the properties of its answer."""
    path = tmp_path / "fuzz.cake"
    path.write_bytes(data)
    start = time.perf_counter()
    res = CliRunner().invoke(main, COMMANDS[command](str(path)))
    took = time.perf_counter() - start
    out = res.output
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"`cake {command}` raised") from res.exception
    assert "Traceback" not in out
    assert "internal error" not in out and "CK9" not in out, out[-2000:]
    assert res.exit_code in (0, 1, 2), res.exit_code
    if res.exit_code == 2:  # usage only: a bad option, or a kernel that cannot run at all
        assert "Error:" in out or "fix them before" in out, out[-2000:]
    assert took < BOUND_S, f"`cake {command}` took {took:.1f} s"


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_pathological_inputs(tmp_path: Path, case: str, command: str) -> None:
    run_cli(tmp_path, command, CASES[case])


def test_ten_thousand_kernels(tmp_path: Path) -> None:
    text = "".join(SMALL_KERNEL.format(i=i) for i in range(10_000)).encode()
    for command in ("check", "lower"):
        run_cli(tmp_path, command, text)


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(text) + 1)
        piece = rng.choice(TOKENS)
        kind = rng.random()
        if kind < 0.4:
            text = text[:pos] + piece + text[pos:]
        elif kind < 0.7:
            text = text[:pos] + text[pos + rng.randint(1, 12):]
        else:
            text = text[:pos] + piece + text[pos + len(piece):]
    return text


def _mutants(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    return [mutate(rng, rng.choice(SEED_TEXTS)).encode("utf-8", "surrogatepass")
            for _ in range(n)]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_mutated_examples(tmp_path: Path, command: str) -> None:
    for data in _mutants(1, 6 if command == "sim" else 15):
        run_cli(tmp_path, command, data)


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_mutated_examples_long(tmp_path: Path, command: str) -> None:
    for data in _mutants(2, 200):
        run_cli(tmp_path, command, data)
