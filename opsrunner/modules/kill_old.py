"""kill_old: stop the old job by pidfile and/or pattern, confirm it is gone, optionally wait for GPUs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from opsrunner import interrupts
from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.locks.job_lock import hold_for_job
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_jobs import GpuWaitArgs, KillArgs, KillReply, ProcInfo

#: Seconds of each wait for the signalled processes to exit: how fresh an interrupted stop's
#: record of what still ran is.
FOLLOW_S = 1.0


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
        if ctx.check_mode:
            reply = ctx.agent(ops.KILL, request)
            killed = reply.get("killed", [])
            ctx.ledger.would_stop.update(int(p) for p in reply.get("main", []))
            msg = f"would kill {len(killed)}: {describe(killed)}" if killed else "nothing to kill"
            return TaskResult(Status.CHANGED if killed else Status.OK, msg=msg, changed=bool(killed),
                              data={"killed": killed, "pids": [p["pid"] for p in killed], "forced": []})
        reply = _Stop(ctx, request, float(args.get("grace", 10))).run()
        killed = reply.get("killed", [])
        data: dict[str, Any] = {"killed": killed, "pids": [p["pid"] for p in killed],
                                "forced": reply.get("forced", [])}
        msg = f"killed {len(killed)}: {describe(killed)}" if killed else "no old process found"
        if reply.get("forced"):
            msg += f"; SIGKILL needed for {len(reply['forced'])} after {args.get('grace', 10)}s grace"
        if args.get("wait_gpu_free") is not None:
            interrupts.so_far(ctx.host, ctx.task, f"stop interrupted while waiting for GPU memory to be released: "
                                                  f"{msg}")
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


class _Stop:
    """The stop in steps (remote/procs.py's op_kill): select and signal, then wait in slices
    of FOLLOW_S for those signalled to exit, then SIGKILL what is left after the grace. After
    each step the task's interrupted record is what was done so far (interrupts.so_far): a
    run stopped meanwhile says which signals went to which pids, and which still ran at the
    last look, where a single request would leave only "not known"."""

    def __init__(self, ctx: TaskContext, request: KillArgs, grace: float) -> None:
        self.ctx, self.request, self.grace = ctx, request, grace
        self.t0 = time.monotonic()

    def run(self) -> KillReply:
        self._so_far("stop interrupted before the target answered: it may have signalled the job; what it "
                     "sent is not known")
        first = self._agent({**self.request, "signal_only": True})
        pairs = first.get("signalled") or []
        if not pairs:
            return first
        sig, sent_at, since = first.get("signal", "SIGTERM"), time.time(), time.monotonic()
        names = dict((p["pid"], p) for p in first.get("killed", []))
        sent = f"sent {sig} to {len(pairs)} at {_clock(sent_at)}: " + describe(
            [names[p[0]] for p in pairs if p[0] in names])
        left = pairs
        self._so_far(f"stop interrupted: {sent}; all were running then; SIGKILL after {self.grace:g}s grace "
                     "was not sent")
        follow: KillArgs = {"follow": left, "main": first.get("main", [])}
        if "pidfile" in self.request:
            follow["pidfile"] = self.request["pidfile"]
        while left and time.monotonic() - since < self.grace:  # the grace by a clock that cannot jump
            wait = min(FOLLOW_S, self.grace - (time.monotonic() - since))
            left = self._agent({**follow, "follow": left, "wait": wait}).get("left") or []
            still = ", ".join(str(p[0]) for p in left) or "none"
            self._so_far(f"stop interrupted: {sent}; still running at {_clock(time.time())} (the last look): "
                         f"{still}; SIGKILL after {self.grace:g}s grace was not sent")
        first["forced"] = []
        if left:
            self._so_far(f"stop interrupted: {sent}; SIGKILL sent at {_clock(time.time())} after {self.grace:g}s "
                         f"grace to {', '.join(str(p[0]) for p in left)}, still running then; whether they are "
                         "gone is not known")
            first["forced"] = self._agent({**follow, "follow": left, "force": True}).get("forced") or []
        return first

    def _agent(self, request: KillArgs) -> KillReply:
        """One step, under what is left of the task's timeout."""
        timeout = self.ctx.timeout
        left = None if timeout is None else max(0.5, timeout - (time.monotonic() - self.t0))
        return self.ctx.agent(ops.KILL, request, timeout=left)

    def _so_far(self, text: str) -> None:
        interrupts.so_far(self.ctx.host, self.ctx.task, text)


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


MODULE = KillOldModule()
