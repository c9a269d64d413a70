"""clear_cache: remove caches (e.g. TorchInductor's), refusing anything that looks dangerous."""

from __future__ import annotations

from collections.abc import Mapping
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


def refusal_anywhere(path: str) -> tuple[str, str] | None:
    """(rule, why) when the agent's guards (remote/guards.py guard_path) refuse `path` on every
    host: these need nothing from the host, so preflight tells them before the run stops the
    job. Paths that need the host (~, $VAR, symlinks, homes, mounts) are judged there only."""
    if not path.strip():
        return "empty", "is an empty path"
    if path[0] not in "/~$":  # expansion on the host changes only a leading ~ or $VAR
        return "relative", "is not an absolute path"
    if all(part in ("", ".", "..") for part in path.split("/")):  # / . .. of / are / everywhere
        return "root", "is the filesystem root"
    return None


def refused_anywhere(args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key path, message) for each of `paths` that every host refuses (refusal_anywhere)."""
    paths = args.get("paths")
    listed = [(f"paths[{i}]", p) for i, p in enumerate(paths)] if isinstance(paths, list) else [("paths", paths)]
    found = []
    for key, path in listed:
        refusal = refusal_anywhere(path) if isinstance(path, str) else None
        if refusal:
            found.append((key, f"{path!r} {refusal[1]}: clear_cache refuses it on every host (rule {refusal[0]})"))
    return found


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
