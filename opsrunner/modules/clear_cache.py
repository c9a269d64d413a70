"""clear_cache: remove caches (e.g. TorchInductor's), refusing anything that looks dangerous."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import ClearArgs


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class ClearCacheModule(Module):
    name = "clear_cache"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        paths = args["paths"] if isinstance(args["paths"], list) else [args["paths"]]
        request: ClearArgs = {"paths": paths, "max_matches": int(args.get("max_matches", 20)),
                              "check_mode": ctx.check_mode}
        reply = ctx.agent(ops.CLEAR, request)
        removed = reply.get("removed", [])
        data = {"removed": removed, "bytes": reply.get("bytes", 0)}
        if not removed:
            return TaskResult(Status.OK, msg="nothing to clear", data=data)
        verb = "would remove" if ctx.check_mode else "removed"
        listing = ", ".join(f"{r['path']} ({human_bytes(r['bytes'])}, {r['files']} files)" for r in removed)
        return TaskResult(Status.CHANGED, changed=True, data=data,
                          msg=f"{verb} {human_bytes(reply.get('bytes', 0))}: {listing}")


MODULE = ClearCacheModule()
