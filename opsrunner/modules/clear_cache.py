"""clear_cache: remove caches (e.g. TorchInductor's), refusing anything that looks dangerous."""

from __future__ import annotations

from typing import Any

from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult


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
        reply = ctx.agent("clear", {"paths": paths, "max_matches": args.get("max_matches", 20),
                                    "check_mode": ctx.check_mode})
        removed = reply.get("removed", [])
        data = {"removed": removed, "bytes": reply.get("bytes", 0)}
        if not removed:
            return TaskResult(Status.OK, msg="nothing to clear", data=data)
        verb = "would remove" if ctx.check_mode else "removed"
        listing = ", ".join(f"{r['path']} ({human_bytes(r['bytes'])}, {r['files']} files)" for r in removed)
        return TaskResult(Status.CHANGED, changed=True, data=data,
                          msg=f"{verb} {human_bytes(reply.get('bytes', 0))}: {listing}")


MODULE = ClearCacheModule()
