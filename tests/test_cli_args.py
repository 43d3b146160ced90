"""The values several commands share (`--dims`, `--arch`, displayed paths) are checked once,
so every command words the same mistake the same way."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cake_cli.args import check_arch, parse_dims
from cake_cli.main import main
from cake_core.source import display_path

REPO = Path(__file__).resolve().parent.parent
GEMM = REPO / "examples" / "gemm_sm90.cake"


def test_dims_merge_in_order() -> None:
    assert parse_dims("M=1,N=2", "N=3 K=4") == {"M": 1, "N": 3, "K": 4}
    assert parse_dims() == {}


@pytest.mark.parametrize(("text", "message"), [
    ("M", "dims are NAME=INT, not 'M'"),
    ("M=x", "dim M must be an integer, not 'x'"),
    ("M=-1", "dim M must be >= 0, not -1"),
])
def test_bad_dims_are_usage_errors(text: str, message: str) -> None:
    with pytest.raises(click.UsageError, match=message):
        parse_dims(text)


@pytest.mark.parametrize("args", [
    ["cost", str(GEMM), "--dims", "M=x"],
    ["run", str(GEMM), "--task", "gemm_bf16", "--sim", "--dims", "M=x"],
    ["bench", str(GEMM), "--task", "gemm_bf16", "--shapes", "M=x"],
])
def test_every_command_words_bad_dims_the_same(args: list[str]) -> None:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and "dim M must be an integer, not 'x'" in r.output


def test_unknown_arch_suggests_the_closest() -> None:
    check_arch(None)
    check_arch("sm_90a")
    with pytest.raises(click.UsageError, match="unknown arch 'sm_90b'; did you mean 'sm_90'"):
        check_arch("sm_90b")


@pytest.mark.parametrize("command", ["check", "cost", "lower", "compile"])
def test_every_command_rejects_an_unknown_arch(command: str) -> None:
    r = CliRunner().invoke(main, [command, str(GEMM), "--arch", "sm_90b"])
    assert r.exit_code == 2 and "did you mean 'sm_90'" in r.output


def test_display_is_relative_to_the_working_directory(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    inner = tmp_path / "k" / "a.cake"
    monkeypatch.chdir(tmp_path)
    assert display_path(inner) == "k/a.cake"
    assert display_path(Path("/elsewhere/b.cake")) == "/elsewhere/b.cake"
