"""shell: run a script with /bin/sh (or another shell) on the target."""

from __future__ import annotations

from typing import Any

from opsrunner.modules.base import Module, TaskContext, command_result
from opsrunner.modules.command import precondition_skip, run_argv
from opsrunner.results import TaskResult


class ShellModule(Module):
    name = "shell"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        skipped = precondition_skip(ctx, args)
        if skipped:
            return skipped
        argv = [args.get("executable", "/bin/sh"), "-c", args["cmd"]]
        return command_result(run_argv(ctx, argv, args))


MODULE = ShellModule()
