"""wait_for: a port open or closed, a path present or absent, or a regex in a file; with a timeout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import WaitForArgs


def _what(args: dict[str, Any]) -> str:
    if args.get("port") is not None:
        return f"{args.get('host') or '127.0.0.1'}:{args['port']}"
    if args.get("search_regex"):
        return f"search string {args['search_regex']} in {args['path']}"
    return f"file {args['path']}"


class WaitForModule(Module):
    name = "wait_for"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        if (args.get("port") is None) == (args.get("path") is None):
            raise ModuleFailure("wait_for: give exactly one of port and path")
        timeout = float(args.get("timeout", 300))
        request: WaitForArgs = {"host": args.get("host"), "port": args.get("port"), "path": args.get("path"),
                                "state": args.get("state"), "search_regex": args.get("search_regex"),
                                "delay": args.get("delay"), "sleep": args.get("sleep"), "timeout": timeout}
        # The agent polls on the target; give it the whole wait plus room to answer.
        reply = ctx.agent(ops.WAIT_FOR, request, timeout=ctx.timeout or timeout + float(args.get("delay") or 0) + 60)
        data: dict[str, object] = {"elapsed": reply["elapsed"]}
        if not reply["ok"]:
            raise ModuleFailure(f"Timeout when waiting for {_what(args)}", data)
        return TaskResult(Status.OK, msg=f"{_what(args)} after {reply['elapsed']:g}s", data=data)


MODULE = WaitForModule()
