"""stat: facts about a path on the target (exists, isdir, mode, owner, checksum, ...)."""

from __future__ import annotations

from typing import Any

from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult


class StatModule(Module):
    name = "stat"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        reply = ctx.agent("fs_stat", {"path": args["path"], "follow": bool(args.get("follow", False)),
                                      "checksum": bool(args.get("get_checksum", True))})
        exists = reply["stat"]["exists"]
        return TaskResult(Status.OK, msg=f"{args['path']} {'exists' if exists else 'does not exist'}",
                          data={"stat": reply["stat"]})


MODULE = StatModule()
