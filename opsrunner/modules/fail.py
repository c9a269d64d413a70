"""fail: fail the host with a message."""

from __future__ import annotations

from typing import Any

from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import TaskResult


class FailModule(Module):
    name = "fail"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        raise ModuleFailure(str(args.get("msg", "Failed as requested from task")))


MODULE = FailModule()
