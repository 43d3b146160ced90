"""Task files may import helper modules that sit beside them (a `_` name: not a task)."""

from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

from cake_cli.main import main
from cake_core.tasks import load_task, task_names

TASK = '''
from _twice import twice

from cake_core.tasks import Shape, Task, Tolerance

TASK = Task(name="helped", description="d", kernels=(), inputs=lambda d, r: {},
            reference=lambda x, d: {}, outputs=(), shapes=(Shape({"N": twice(4)}),),
            sim_shapes=(), tolerances={"f32": Tolerance(0.0, 0.0)}, baseline="-")
'''


def test_a_task_imports_its_helper_and_leaves_the_import_path_as_it_was(
        tmp_path: Path) -> None:
    (tmp_path / "_twice.py").write_text("def twice(n):\n    return 2 * n\n")
    (tmp_path / "helped.py").write_text(TASK)
    before = list(sys.path)
    task = load_task(tmp_path / "helped.py")
    assert task.shapes[0].dims == {"N": 8}
    assert sys.path == before


def test_the_attention_tasks_share_one_helper_that_is_not_a_task() -> None:
    names = task_names()
    assert "_attention" not in names and "attention_fwd_d64" in names
    for name, d in (("attention_fwd", 128), ("attention_fwd_d64", 64),
                    ("attention_fwd_d256", 256), ("attention_fwd_causal", 128)):
        assert load_task(name).fixed == {"D": d}


def test_cake_examples_copies_the_helpers_with_the_tasks(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["examples", str(tmp_path / "ex")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ex" / "tasks" / "_attention.py").is_file()
    task = load_task(tmp_path / "ex" / "tasks" / "attention_fwd_causal.py")
    assert task.name == "attention_fwd_causal"
