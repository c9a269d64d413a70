"""The job lock, the controller's side: one restart of a job at a time on its target.

The lock is an flock on `<pidfile base>.lock` on the target, held by the host's agent
itself (remote/job_locks.py: its own process, not a worker), which lives exactly as long
as this controller's connection. The lock ends with the agent: at `state: unlocked`, at
the end of the run, on Ctrl-C, when the controller dies or when the connection drops (a
heartbeat lease covers connections that die without a FIN: the agent lets go after
LEASE_S without any request, and AgentSession.keep_leased beats while it is idle).

The `job_lock` task (modules/job_lock.py) takes and releases it here; kill_old and
launch_detached take it implicitly (hold_for_job).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from opsrunner.connections.base import Connection
from opsrunner.errors import ModuleFailure
from opsrunner.locks.holder import LockHolder, describe_holder
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.job_locks import LockReply, LockRequest


class TaskOnHost(Protocol):
    """What the job lock reads of a task's context (modules/base.py's TaskContext), as a
    protocol: the locks sit below the modules and import none of them."""

    @property
    def connection(self) -> Connection: ...

    @property
    def variables(self) -> Mapping[str, Any]: ...

    @property
    def check_mode(self) -> bool: ...

    @property
    def notes(self) -> list[str]: ...

#: Seconds the agent keeps a lock without any request; the controller beats every LEASE_S / 4.
LEASE_S = 60.0
#: Seconds the agent may take to answer, beyond the request's own wait.
REPLY_MARGIN_S = 60.0


def lock_path(pidfile: str | None = None, path: str | None = None) -> str:
    """The lock file: `path`, else beside the pidfile (train.pid -> train.lock; ~ expands on the target)."""
    if path:
        return path
    base = str(pidfile)
    return (base[:-4] if base.endswith(".pid") else base) + ".lock"


def holds_job_lock(connection: Connection, path: str) -> bool:
    """This run holds the job lock at `path` on this connection's target."""
    return path in connection.agent().locks


def take_job_lock(connection: Connection, path: str, *, wait: float, holder: LockHolder,
                  probe: bool = False) -> TaskResult:
    """Take the job lock at `path` for the rest of the run (waiting up to `wait` seconds for
    another run's), or with `probe` (check mode) only say whether it is free. Raises
    ModuleFailure naming the holder (data["holder"]) when another run keeps it."""
    session = connection.agent()
    if path in session.locks:
        return TaskResult(Status.OK, msg="already held by this run")
    request: LockRequest = {"path": path, "wait": wait, "lease": LEASE_S, "holder": holder.record(),
                            "probe": probe}
    reply = cast("LockReply", session.call("job_lock", cast("dict[str, Any]", request),
                                           timeout=wait + REPLY_MARGIN_S, shown=f"agent job_lock {path}"))
    if reply.get("locked") is not True:
        return _not_taken(reply)
    session.locks.add(path)
    session.keep_leased(LEASE_S / 4)
    msg = f"locked {reply['path']} until the end of the run"
    stale = reply.get("stale")
    if stale:
        msg += f"; took over from {describe_holder(LockHolder.from_record(stale))}, which is no longer running"
    return TaskResult(Status.OK, msg=msg, data={"path": reply["path"], "stale": stale})


def _not_taken(reply: LockReply | dict[str, Any]) -> TaskResult:
    if reply.get("busy"):
        record = reply.get("holder")
        raise ModuleFailure(f"locked by {describe_holder(LockHolder.from_record(record))}: another run is "
                            f"restarting this job (lock {reply['path']})", {"holder": record})
    if reply.get("free"):
        return TaskResult(Status.OK, msg=f"{reply['path']} is free (check mode: not taken)")
    raise ModuleFailure(f"the job lock could not be taken on the target: {reply.get('error', reply)}")


def release_job_lock(connection: Connection, path: str) -> TaskResult:
    """Let go of the job lock at `path` now, if this run holds it; the agent confirms, so the
    lock is free once this returns."""
    session = connection.agent()
    if path not in session.locks:
        return TaskResult(Status.OK, msg="not held by this run")
    session.locks.discard(path)
    reply = cast("LockReply", session.call("job_unlock", {"path": path}, timeout=30))
    if not reply.get("released"):
        return TaskResult(Status.OK, msg=f"released ({reply.get('why') or reply.get('error') or 'not held'})")
    return TaskResult(Status.OK, msg=f"released {reply['path']}")


def holder_of(ctx: TaskOnHost) -> LockHolder:
    """This run, as a job lock's holder record names it (its playbook and history id)."""
    return LockHolder.this_run(str(ctx.variables.get("opsrunner_playbook", "")),
                               ctx.variables.get("opsrunner_run_id") or None)


def hold_for_job(ctx: TaskOnHost, pidfile: str | None) -> None:
    """The job lock that kill_old and launch_detached take implicitly, keyed by the job's
    pidfile, from the first of them until the end of the run, where the play took none:
    two runs of any playbook that restart the same job never both kill and launch. Raises
    ModuleFailure naming the holder when another run has it (check mode only probes)."""
    if not pidfile:
        return
    path = lock_path(pidfile)
    if holds_job_lock(ctx.connection, path):
        return
    try:
        taken = take_job_lock(ctx.connection, path, wait=0, holder=holder_of(ctx),
                              probe=ctx.check_mode)
    except ModuleFailure as exc:
        if "holder" in exc.data:
            raise  # another run restarts this job
        # No lock file can be made beside the pidfile (its folder is missing or not a
        # folder): the task's own checks name what is wrong there, and nothing can race on it.
        ctx.notes.append(f"job lock not taken: {str(exc).splitlines()[-1][:300]}")
        return
    if holds_job_lock(ctx.connection, path):
        ctx.notes.append(f"{taken.msg} (taken for this job, as no job_lock task did)")
