"""meta: the engine acts on the result (flush handlers, end the play or the host)."""

from __future__ import annotations

from typing import Any

from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult


class MetaModule(Module):
    name = "meta"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        return TaskResult(Status.OK, msg=str(args["action"]), data={"meta": args["action"]})


MODULE = MetaModule()
