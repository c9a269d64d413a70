"""kill_old: stop the old job by pidfile and/or pattern, confirm it is gone, optionally wait for GPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.locks.job_lock import hold_for_job
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_jobs import GpuWaitArgs, KillArgs, ProcInfo


def _clip(text: str, width: int) -> str:
    """A command line cut to `width` characters says so: a cut path must not read as a real one."""
    return text if len(text) <= width else text[:width - 1] + "…"


def describe(procs: list[ProcInfo], limit: int = 10) -> str:
    shown = [f"{p['pid']} ({_clip(p['cmdline'], 100)})" for p in procs[:limit]]
    more = f" and {len(procs) - limit} more" if len(procs) > limit else ""
    return ", ".join(shown) + more


class KillOldModule(Module):
    name = "kill_old"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        if not args.get("pidfile") and not args.get("pattern"):
            return ["kill_old needs a pidfile or a pattern (both are empty)"]
        return []

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        hold_for_job(ctx, args.get("pidfile"))  # the job this task changes is locked by this run
        request: KillArgs = {"check_mode": ctx.check_mode}
        for key in ("pidfile", "pattern", "user"):
            if key in args:
                request[key] = args[key]
        if "signal" in args:
            request["signal"] = str(args["signal"])
        if "grace" in args:
            request["grace"] = float(args["grace"])
        reply = ctx.agent(ops.KILL, request)
        killed = reply.get("killed", [])
        data: dict[str, Any] = {"killed": killed, "pids": [p["pid"] for p in killed],
                                "forced": reply.get("forced", [])}
        if ctx.check_mode:
            ctx.ledger.would_stop.update(int(p) for p in reply.get("main", []))
            msg = f"would kill {len(killed)}: {describe(killed)}" if killed else "nothing to kill"
            return TaskResult(Status.CHANGED if killed else Status.OK, msg=msg, changed=bool(killed), data=data)
        msg = f"killed {len(killed)}: {describe(killed)}" if killed else "no old process found"
        if reply.get("forced"):
            msg += f"; SIGKILL needed for {len(reply['forced'])} after {args.get('grace', 10)}s grace"
        if args.get("wait_gpu_free") is not None:
            msg += "; " + self._wait_gpu(ctx, args, data)
        return TaskResult(Status.CHANGED if killed else Status.OK, msg=msg, changed=bool(killed), data=data)

    def _wait_gpu(self, ctx: TaskContext, args: dict[str, Any], data: dict[str, Any]) -> str:
        wait = float(args["wait_gpu_free"])
        below = float(args.get("gpu_free_below_mb", 1024))
        timeout = None if ctx.timeout is None else max(ctx.timeout, wait + 30)
        request: GpuWaitArgs = {"wait": wait, "below_mb": below, "gpus": args.get("gpus")}
        reply = ctx.agent(ops.GPU_WAIT, request,
                          timeout=timeout)
        if reply.get("skipped"):
            ctx.notes.append(reply["msg"])
            return str(reply["msg"])
        data["gpu_memory_mb"] = reply.get("used", {})
        if reply.get("busy"):
            busy = ", ".join(f"GPU {k}: {v:g} MB" for k, v in sorted(reply["busy"].items()))
            raise ModuleFailure(f"GPU memory still in use {wait:g}s after the kill ({busy}; "
                                f"free means below {below:g} MB)", data)
        return f"GPU memory released (all below {below:g} MB)"


MODULE = KillOldModule()
