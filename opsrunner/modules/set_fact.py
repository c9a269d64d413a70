"""set_fact: the engine stores the returned facts as the host's variables."""

from __future__ import annotations

from typing import Any

from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult


class SetFactModule(Module):
    name = "set_fact"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        facts = {k: v for k, v in args.items() if k != "cacheable"}
        return TaskResult(Status.OK, data={"ansible_facts": facts})


MODULE = SetFactModule()
