"""stat: facts about a path on the target (exists, isdir, mode, owner, checksum, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import FsStatArgs


class StatModule(Module):
    name = "stat"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        request: FsStatArgs = {"path": args["path"], "follow": bool(args.get("follow", False)),
                               "checksum": bool(args.get("get_checksum", True))}
        reply = ctx.agent(ops.FS_STAT, request)
        exists = reply["stat"]["exists"]
        return TaskResult(Status.OK, msg=f"{args['path']} {'exists' if exists else 'does not exist'}",
                          data={"stat": reply["stat"]})


MODULE = StatModule()
