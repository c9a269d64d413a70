"""lineinfile: make sure one line is in a file (or is not), found by regexp or by itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.fsutil import mode_arg, unified
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import LineInFileArgs


class LineInFileModule(Module):
    name = "lineinfile"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        state = args.get("state", "present")
        if state == "present" and "line" not in args:
            raise ModuleFailure("lineinfile: state present needs line")
        if state == "absent" and "line" not in args and "regexp" not in args:
            raise ModuleFailure("lineinfile: state absent needs line or regexp")
        request: LineInFileArgs = {
            "path": args["path"], "line": args.get("line"), "regexp": args.get("regexp"),
            "insertafter": args.get("insertafter"), "insertbefore": args.get("insertbefore"),
            "create": args.get("create"), "backup": args.get("backup"), "state": state,
            "mode": mode_arg(args.get("mode")), "check": ctx.check_mode}
        reply = ctx.agent(ops.LINEINFILE, request)
        if not reply["changed"]:
            return TaskResult(Status.OK, msg=reply.get("msg", ""), data={"backup": ""})
        diff = unified(reply["before"], reply["after"], str(args["path"])) if ctx.diff_mode else ""
        data = {"backup": reply.get("backup_file", "")}
        msg = _would(state, reply["before"], reply["after"]) if ctx.check_mode else reply["msg"]
        return TaskResult(Status.CHANGED, changed=True, msg=msg, diff=diff, data=data)


def _would(state: str, before: str, after: str) -> str:
    """Check mode's message: what the edit would do (the agent's says it was done, which it was not)."""
    old, new = len(before.splitlines()), len(after.splitlines())
    if state == "absent":
        return f"would remove {old - new} line(s)"
    return "would add the line" if new > old else "would replace the line"


MODULE = LineInFileModule()
