"""The run's memo of argument checks (preflight.memo_check): a check is reused only for the same
task with the same rendered arguments."""

from __future__ import annotations

from opsrunner.argcheck import Memo, memo_check
from opsrunner.errors import SourcePos
from opsrunner.playbook import Task


def pause(name: str) -> Task:
    return Task(name, "pause", {"seconds": "{{ s }}"}, SourcePos("pb.yml", 3, 7), {})


def test_each_rendering_is_checked_on_its_own() -> None:
    memo: Memo = {}
    task = pause("p")
    assert memo_check(task, {"seconds": 1}, False, memo).problems == []
    bad = memo_check(task, {"seconds": "soon"}, False, memo)
    assert [p.key_path for p in bad.problems] == ["pause.seconds"]
    assert memo_check(task, {"seconds": 1}, False, memo).problems == []  # the first check, kept
    assert len(memo) == 2


def test_a_task_that_reuses_a_freed_task_s_id_is_checked_again() -> None:
    memo: Memo = {}
    task, other = pause("p"), pause("q")
    bad = memo_check(other, {"seconds": "soon"}, False, memo)
    assert bad.problems
    # As if `other` had been freed and `task` had its id: the entry names another task.
    memo[(id(task), False, repr({"seconds": "soon"}))] = memo.pop((id(other), False, repr({"seconds": "soon"})))
    assert memo_check(task, {"seconds": "soon"}, False, memo) is not bad


def _loaded_tasks(tmp_path, body: str) -> list[Task]:
    from opsrunner.playbook import load_playbook
    from opsrunner.tasks import iter_tasks

    (tmp_path / "pb.yml").write_text("- hosts: all\n  tasks:\n" + body)
    return list(iter_tasks(load_playbook(tmp_path / "pb.yml").plays[0].tasks))


def test_arguments_checked_at_load_are_marked_only_without_templates(tmp_path) -> None:
    plain, templated = _loaded_tasks(tmp_path, "    - command: 'true'\n"
                                               "    - command: 'echo {{ x }}'\n")
    assert plain.args_checked and not templated.args_checked


def test_a_check_of_arguments_checked_at_load_says_what_the_full_check_says(tmp_path) -> None:
    from dataclasses import replace

    from opsrunner.argcheck import check_args

    (task,) = _loaded_tasks(tmp_path, "    - pause: seconds=2\n")
    full = replace(task, args_checked=False)
    for rendered in ({"seconds": 2}, {"seconds": "soon"}, {"minutes": 1, "seconds": 2}, {}):
        got, want = check_args(task, rendered), check_args(full, rendered)
        assert (got.args, got.problems) == (want.args, want.problems)
    assert check_args(task, {"seconds": "soon"}).problems  # not the arguments loaded: checked again
