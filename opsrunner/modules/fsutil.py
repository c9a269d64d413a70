"""Shared by the file modules (copy, template, file, lineinfile): modes, diffs, replies."""

from __future__ import annotations

import base64
import difflib
from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.modules.base import TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import FsPutArgs


def mode_arg(mode: Any) -> str | None:
    """'0644', '644' or YAML's 0644 (read as the integer 420) -> the octal digits."""
    if mode is None:
        return None
    if isinstance(mode, int):
        return format(mode, "o")
    text = str(mode).strip()
    if not text or any(c not in "01234567" for c in text):
        raise ValueError(f"mode must be octal digits such as '0644', not {mode!r}")
    return text


def unified(before: str, after: str, path: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        f"{path} (before)", f"{path} (after)"))


def put_content(ctx: TaskContext, dest: str, content: bytes, args: dict[str, Any]) -> TaskResult:
    """copy and template: send the bytes; the agent writes them only when they differ."""
    request: FsPutArgs = {
        "dest": dest, "content_b64": base64.b64encode(content).decode("ascii"), "mode": mode_arg(args.get("mode")),
        "owner": args.get("owner"), "group": args.get("group"), "backup": bool(args.get("backup")),
        "check": ctx.check_mode, "diff": ctx.diff_mode,
    }
    reply = ctx.agent(ops.FS_PUT, request)
    diff = unified(reply["before"], content.decode("utf-8", "replace"), dest) if "before" in reply else ""
    data = {"dest": reply["dest"], "checksum": reply["checksum"]}
    if "backup_file" in reply:
        data["backup_file"] = reply["backup_file"]
    if not reply["changed"]:
        return TaskResult(Status.OK, msg=f"{dest} is up to date", data=data)
    verb = "would write" if ctx.check_mode else "wrote"
    return TaskResult(Status.CHANGED, changed=True, msg=f"{verb} {dest}", diff=diff, data=data)
