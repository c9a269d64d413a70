"""assert: fail unless every expression holds (evaluated on the controller)."""

from __future__ import annotations

from typing import Any

from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult
from opsrunner.templating import truthy


class AssertModule(Module):
    name = "assert"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        that = args["that"] if isinstance(args["that"], list) else [args["that"]]
        for expr in that:
            if not truthy(expr, ctx.variables):
                raise ModuleFailure(args.get("fail_msg") or f"Assertion failed: {expr}",
                                    {"assertion": expr, "evaluated_to": False})
        return TaskResult(Status.OK, msg=args.get("success_msg", "All assertions passed"))


MODULE = AssertModule()
