"""debug: print a message or a variable."""

from __future__ import annotations

import json
from typing import Any

from opsrunner.errors import TemplateError
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult
from opsrunner.templating import evaluate


class DebugModule(Module):
    name = "debug"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        if "var" in args:
            try:
                value = evaluate(args["var"], ctx.variables)
            except TemplateError as exc:
                if "undefined" not in str(exc):
                    raise
                value = "VARIABLE IS NOT DEFINED!"  # ansible-core's words; the task is ok
            text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
            return TaskResult(Status.OK, msg=f"{args['var']}: {text}", data={args["var"]: value})
        msg = args.get("msg", "Hello world!")
        text = msg if isinstance(msg, str) else json.dumps(msg, indent=2, default=str)
        return TaskResult(Status.OK, msg=text, data={"msg_value": msg})


MODULE = DebugModule()
