"""job_lock: hold a lock tied to one job on its target, across the tasks of a restart.

A keeper (remote/keeper.py, standalone like the watchdog) takes flock() on
`<pidfile base>.lock` on the target and stays running on a channel this controller holds
open. The lock ends with that channel: at
`state: unlocked`, at the end of the run, on Ctrl-C, when the controller dies or when the
connection drops (a heartbeat lease covers connections that die without a FIN).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from opsrunner.connections.held import HeldCommand
from opsrunner.errors import ModuleFailure
from opsrunner.locks import describe_holder, holder_record
from opsrunner.modules.base import Module, TaskContext
from opsrunner.packagedata import package_text
from opsrunner.results import Status, TaskResult

#: Seconds the keeper lives without a heartbeat; the controller beats every LEASE_S / 4.
LEASE_S = 60.0


@lru_cache(maxsize=1)
def keeper_source() -> str:
    return package_text("remote/keeper.py")


def lock_path(args: dict[str, Any]) -> str:
    """The lock file: `path`, else beside the pidfile (train.pid -> train.lock; ~ expands on the target)."""
    if args.get("path"):
        return str(args["path"])
    pidfile = str(args["pidfile"])
    return (pidfile[:-4] if pidfile.endswith(".pid") else pidfile) + ".lock"


def _reply(held: HeldCommand, timeout: float) -> dict[str, Any] | None:
    """The next JSON line from the keeper (anything a wrapper printed before it is skipped)."""
    while True:
        line = held.readline(timeout)
        if line is None:
            return None
        if line.strip().startswith(b"{"):
            try:
                reply: dict[str, Any] = json.loads(line)
                return reply
            except ValueError:
                continue


class JobLockModule(Module):
    name = "job_lock"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        path = lock_path(args)
        key = "job_lock:" + path
        if args.get("state", "locked") == "unlocked":
            return self._release(ctx, key)
        if key in ctx.connection.held:
            return TaskResult(Status.OK, msg="already held by this run")
        wait = float(args.get("wait") or 0)
        playbook = str(ctx.variables.get("opsrunner_playbook", ""))
        request = {"path": path, "wait": wait, "lease": LEASE_S, "holder": holder_record(playbook),
                   "probe": ctx.check_mode}
        held = ctx.connection.hold([ctx.connection.spec.python, "-S", "-c", keeper_source()])
        held.send(json.dumps(request).encode() + b"\n")
        reply = _reply(held, wait + 60)
        if reply is None or reply.get("locked") is not True:
            held.close()
            return self._not_taken(ctx, reply, held)
        ctx.connection.held[key] = held
        held.keepalive(LEASE_S / 4)
        msg = f"locked {reply['path']} until the end of the run"
        if reply.get("stale"):
            msg += f"; took over from {describe_holder(reply['stale'])}, which is no longer running"
        return TaskResult(Status.OK, msg=msg, data={"path": reply["path"], "stale": reply.get("stale")})

    def _not_taken(self, ctx: TaskContext, reply: dict[str, Any] | None, held: HeldCommand) -> TaskResult:
        if reply is None:
            detail = held.stderr().strip()[-2000:] or "no reply"
            raise ModuleFailure(f"the lock keeper on the target failed: {detail}")
        if reply.get("busy"):
            raise ModuleFailure(f"locked by {describe_holder(reply.get('holder'))}: another run is restarting "
                                f"this job (lock {reply['path']})", {"holder": reply.get("holder")})
        if reply.get("free"):
            return TaskResult(Status.OK, msg=f"{reply['path']} is free (check mode: not taken)")
        raise ModuleFailure(str(reply.get("error") or reply))

    def _release(self, ctx: TaskContext, key: str) -> TaskResult:
        held = ctx.connection.held.pop(key, None)
        if held is None:
            return TaskResult(Status.OK, msg="not held by this run")
        held.send(b"release\n")
        reply = _reply(held, 30)  # the keeper confirms, so the lock is free once this task ends
        held.close()
        if reply is None or not reply.get("released"):
            return TaskResult(Status.OK, msg="released (the keeper ended without confirming)")
        return TaskResult(Status.OK, msg=f"released {reply['path']}")


MODULE = JobLockModule()


def hold_for_job(ctx: TaskContext, pidfile: str | None) -> None:
    """The job lock that kill_old and launch_detached take implicitly, keyed by the job's
    pidfile, from the first of them until the end of the run, where the play took none:
    two runs of any playbook that restart the same job never both kill and launch. Raises
    ModuleFailure naming the holder when another run has it (check mode only probes)."""
    if not pidfile:
        return
    key = "job_lock:" + lock_path({"pidfile": pidfile})
    if key in ctx.connection.held:
        return
    try:
        taken = MODULE.run(ctx, {"pidfile": pidfile, "wait": 0})
    except ModuleFailure as exc:
        if "holder" in exc.data:
            raise  # another run restarts this job
        # No lock file can be made beside the pidfile (its folder is missing or not a
        # folder): the task's own checks name what is wrong there, and nothing can race on it.
        ctx.notes.append(f"job lock not taken: {str(exc).splitlines()[-1][:300]}")
        return
    if key in ctx.connection.held:
        ctx.notes.append(f"{taken.msg} (taken for this job, as no job_lock task did)")
