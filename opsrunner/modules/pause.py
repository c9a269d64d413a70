"""pause: wait on the controller."""

from __future__ import annotations

import time
from typing import Any

from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult


class PauseModule(Module):
    name = "pause"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        seconds = float(args["seconds"])
        if not ctx.check_mode:
            time.sleep(seconds)
        return TaskResult(Status.OK, msg=args.get("prompt", f"paused {seconds:g}s"))


MODULE = PauseModule()
