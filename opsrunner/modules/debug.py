"""debug: print a message or a variable."""

from __future__ import annotations

import json
import re
from typing import Any

from opsrunner.errors import TemplateError
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult
from opsrunner.templating import evaluate


class DebugModule(Module):
    name = "debug"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        if "msg" in args and "var" in args:  # one would be dropped without a word
            return ["debug takes msg or var, not both (they are mutually exclusive, as in ansible-core)"]
        return []

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        if int(args.get("verbosity", 0)) > int(ctx.variables.get("ansible_verbosity", 0)):
            return TaskResult(Status.SKIPPED, msg="Verbosity threshold not met.")
        if "var" in args:
            warnings: list[str] = []
            try:
                value = evaluate(args["var"], ctx.variables)
            except TemplateError as exc:
                if "undefined" not in str(exc):
                    raise
                # ansible-core 2.19's words: the value names the error, a warning repeats it; the task is ok
                reason = _undefined_reason(exc.bare_message)
                value = f"<< error 1 - {reason} >>"
                warnings.append(f"Encountered 1 template error.\nerror 1 - {reason}")
            text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
            return TaskResult(Status.OK, msg=f"{args['var']}: {text}", data={args["var"]: value},
                              warnings=warnings)
        msg = args.get("msg", "Hello world!")
        text = msg if isinstance(msg, str) else json.dumps(msg, indent=2, default=str)
        return TaskResult(Status.OK, msg=text, data={"msg_value": msg})


def _undefined_reason(message: str) -> str:
    """Jinja's undefined-variable message in ansible-core's words."""
    reason = message.removeprefix("undefined variable: ")
    match = re.fullmatch(r"'(\w+) object' has no attribute (.*)", reason)
    return f"object of type '{match.group(1)}' has no attribute {match.group(2)}" if match else reason


MODULE = DebugModule()
