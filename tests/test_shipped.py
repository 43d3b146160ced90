"""What a wheel ships beside the code: the examples, the tasks and the rule pages, found
from any working directory; a task's kernels are found relative to the task file; `cake
examples` copies them out and `cake --version` names the plugin API."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core import __version__
from cake_core.diagnostics.codes import lookup
from cake_core.docs import rule_doc
from cake_core.plugins.api import PLUGIN_API_VERSION
from cake_core.shipped import EXAMPLES_DIR, RULES_DIR, TASKS_DIR
from cake_core.tasks import load_task, task_names

ROOT = Path(__file__).resolve().parent.parent

USER_TASK = '''
from cake_core.tasks import KernelEntry, Shape, Task, Tolerance

TASK = Task(name="mine", description="a user's task", kernels=(KernelEntry("../k.cake", "k"),),
            inputs=lambda dims, rng: {}, reference=lambda t, dims: {}, outputs=(),
            shapes=(Shape({"M": 1}),), sim_shapes=(Shape({"M": 1}),),
            tolerances={"f32": Tolerance(0.0, 0.0)}, baseline="none")
'''


def test_a_checkout_reads_the_repository_folders() -> None:
    assert EXAMPLES_DIR == ROOT / "examples" and TASKS_DIR == ROOT / "examples" / "tasks"
    assert RULES_DIR == ROOT / "docs" / "rules"


def test_tasks_and_their_kernels_are_found_from_any_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert {"gemm_bf16", "gemm_f16_sm80", "kmeans_assign"} <= set(task_names())
    task = load_task("kmeans_assign")
    entry, dbuf, pingpong, *_ = task.kernels
    assert dbuf.path.resolve() == ROOT / "examples" / "kmeans_assign_sm90_dbuf.cake"
    assert pingpong.path.resolve() == ROOT / "examples" / "kmeans_assign_sm90_pingpong.cake"
    assert entry.path.resolve() == ROOT / "examples" / "kmeans_assign_sm90.cake"
    assert task.entry("kmeans_assign_sm90", entry.path) is entry


def test_a_users_own_task_is_found_by_name_in_examples_tasks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples" / "tasks").mkdir(parents=True)
    (tmp_path / "examples" / "tasks" / "mine.py").write_text(USER_TASK, encoding="utf-8")
    assert "mine" in task_names()
    (entry,) = load_task("mine").kernels
    assert entry.path.resolve() == tmp_path / "examples" / "k.cake"


def test_explain_prints_the_whole_rule_page() -> None:
    rule = lookup("CK302")
    assert rule is not None
    page = (RULES_DIR / "CK302.md").read_text(encoding="utf-8")
    assert rule_doc(rule).strip() in page and "```" in rule_doc(rule)


def test_cake_examples_copies_kernels_and_tasks_and_keeps_existing_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["examples"])
    assert r.exit_code == 0, r.output
    copied = sorted(p.relative_to(tmp_path / "examples").as_posix()
                    for p in (tmp_path / "examples").rglob("*") if p.is_file())
    assert "kmeans_assign_sm90.cake" in copied and "tasks/kmeans_assign.py" in copied
    assert f"copied {len(copied)} files to examples/" in r.output
    (tmp_path / "examples" / "gemm_sm90.cake").write_text("# mine\n", encoding="utf-8")
    again = CliRunner().invoke(main, ["examples"])
    assert "kept examples/gemm_sm90.cake (already there)" in again.output
    assert "copied 0 files" in again.output
    assert (tmp_path / "examples" / "gemm_sm90.cake").read_text() == "# mine\n"


def test_version_names_the_release_and_the_plugin_api() -> None:
    r = CliRunner().invoke(main, ["--version"])
    assert r.exit_code == 0
    assert r.output == f"cake {__version__} (plugin API {PLUGIN_API_VERSION})\n"


def test_the_first_party_plugins_are_entry_points_of_the_main_distribution() -> None:
    eps = {ep.name: ep for ep in entry_points(group="cake.plugins")}
    for name, value in (("cake-tactics", "cake_tactics:plugin"),
                        ("cake-kmeans", "cake_kmeans:plugin")):
        assert eps[name].value == value and eps[name].dist is not None
        assert eps[name].dist.name == "cake-kernels"
