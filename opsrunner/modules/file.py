"""file: a directory, an empty file (touch), a symlink, or nothing (absent); mode and owner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.fsutil import mode_arg
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import FsFileArgs


class FileModule(Module):
    name = "file"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        state = args.get("state", "file")
        if state == "link" and not args.get("src"):
            raise ModuleFailure("file: state link needs src (what the link points to)")
        request: FsFileArgs = {
            "path": args["path"], "state": state, "src": args.get("src"), "mode": mode_arg(args.get("mode")),
            "owner": args.get("owner"), "group": args.get("group"), "check": ctx.check_mode,
        }
        reply = ctx.agent(ops.FS_FILE, request)
        data = {"path": reply["path"], "state": reply["state"]}
        if not reply["changed"]:
            return TaskResult(Status.OK, msg=f"{args['path']} is {state}", data=data)
        verb = "would make" if ctx.check_mode else "made"
        diff = f"{args['path']}: -> {state}\n" if ctx.diff_mode else ""
        return TaskResult(Status.CHANGED, changed=True, msg=f"{verb} {args['path']} {state}", diff=diff, data=data)


MODULE = FileModule()
