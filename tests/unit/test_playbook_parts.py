"""The playbook loader is one class joined from parts (opsrunner/playbook/): each method the
shared base only declares must be implemented by a part that comes before it."""

from __future__ import annotations

import inspect

from opsrunner.playbook.plays import PlaybookLoader
from opsrunner.playbook.state import LoaderState


def test_every_declared_method_of_the_base_is_implemented_by_a_part() -> None:
    declared = [name for name, member in vars(LoaderState).items()
                if inspect.isfunction(member) and "raise NotImplementedError" in inspect.getsource(member)]
    assert {"load", "task_list", "role_tasks", "make_block", "include_tasks", "include_role"} <= set(declared)
    for name in declared:
        owner = next(cls for cls in PlaybookLoader.__mro__ if name in vars(cls))
        assert owner is not LoaderState, f"{name} is only declared"
