"""The README tour writes its files under `build/tour/`, never into the directory it runs in."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main

ROOT = Path(__file__).resolve().parents[1]
TOUR_DIR = "build/tour/"


def _tour_commands() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## A five-minute tour", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("cake ")]


def _writing() -> list[list[str]]:
    return [args for args in _tour_commands() if "-o" in args]


def test_every_file_the_tour_writes_is_under_the_ignored_tour_dir() -> None:
    outputs = [args[args.index("-o") + 1] for args in _writing()]
    assert len(outputs) == 2  # the SARIF log and the lowered CUDA
    assert all(out.startswith(TOUR_DIR) for out in outputs), outputs
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert TOUR_DIR.split("/")[0] + "/" in ignored


@pytest.mark.parametrize("args", _writing(), ids=lambda a: a[1])
def test_the_tour_creates_its_dir_and_leaves_the_rest_alone(
        args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args[1:])
    assert r.exit_code == 0, r.output
    out = Path(args[args.index("-o") + 1])
    assert out.stat().st_size > 0
    assert {p.name for p in tmp_path.iterdir()} == {"examples", "build"}
    written = {p.relative_to(tmp_path).as_posix() for p in (tmp_path / "build").rglob("*")
               if p.is_file()}
    # lowering writes the kernel metadata beside the .cu
    expected = {out.as_posix()} | ({out.with_suffix(".json").as_posix()}
                                   if out.suffix == ".cu" else set())
    assert written == expected
