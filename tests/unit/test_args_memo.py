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
