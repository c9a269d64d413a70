"""The job lock, the controller's side: one restart of a job at a time on its target.

The lock is an flock on `<pidfile base>.lock` on the target, held by the host's agent
itself (remote/job_locks.py: its own process, not a worker), which lives exactly as long
as this controller's connection. The lock ends with the agent: at `state: unlocked`, at
the end of the run, on Ctrl-C, when the controller dies or when the connection drops (a
heartbeat lease covers connections that die without a FIN: the agent lets go and exits
after the lease, LEASE_S or the `job_lock_lease` variable, without any request, and
AgentSession.keep_leased beats while it is idle). A lock that went before the run let go
of it (a controller stopped past the lease) is JobLocksLost: the host is out of the run.

The `job_lock` task (modules/job_lock.py) takes and releases it here; kill_old and
launch_detached take it implicitly (hold_for_job).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from opsrunner.connections.base import Connection
from opsrunner.connections.leases import DEFAULT_LEASE_S
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

    @property
    def host(self) -> str: ...

#: Seconds the agent keeps a lock without any request; the controller beats every lease / 4.
LEASE_S = DEFAULT_LEASE_S
#: The variable that sets another lease (seconds) for the job locks a host's tasks take.
LEASE_VAR = "job_lock_lease"
#: The shortest and longest lease: the controller beats every quarter lease while idle, and
#: a lapse is noticed only after a gap of half the lease (a day at most).
MIN_LEASE_S = 1.0
MAX_LEASE_S = 86400.0
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


def lease_seconds(value: Any) -> float:
    """A lease in seconds; ValueError says what is wrong with it."""
    try:
        lease = float(value)
    except (TypeError, ValueError):
        lease = float("nan")
    if isinstance(value, bool) or not 0 < lease < float("inf"):
        raise ValueError(f"must be a positive number of seconds, got {value!r}")
    if not MIN_LEASE_S <= lease <= MAX_LEASE_S:  # the heartbeat comes every quarter lease
        raise ValueError(f"must be from {MIN_LEASE_S:g} to {MAX_LEASE_S:g} seconds, got {value!r}")
    return lease


def lease_of(variables: Mapping[str, Any]) -> float:
    """The lease of the job locks a task takes: the `job_lock_lease` variable, else LEASE_S.
    ModuleFailure when it is no positive number (preflight refuses one known before the run)."""
    raw = variables.get(LEASE_VAR)
    if raw is None:
        return LEASE_S
    try:
        return lease_seconds(raw)
    except ValueError as exc:
        raise ModuleFailure(f"variable {LEASE_VAR} (the job lock's lease): {exc}") from None


def take_job_lock(connection: Connection, path: str, *, wait: float, holder: LockHolder,
                  probe: bool = False, lease: float = LEASE_S, host: str | None = None) -> TaskResult:
    """Take the job lock at `path` for the rest of the run (waiting up to `wait` seconds for
    another run's), kept by the agent `lease` seconds past its last word from this
    controller, or with `probe` (check mode) only say whether it is free. Raises
    ModuleFailure naming the holder (data["holder"]) when another run keeps it."""
    session = connection.agent()
    if path in session.locks:
        return TaskResult(Status.OK, msg="already held by this run")
    request: LockRequest = {"path": path, "wait": wait, "lease": lease, "holder": holder.record(),
                            "probe": probe}
    reply = cast("LockReply", session.call("job_lock", cast("dict[str, Any]", request),
                                           timeout=wait + REPLY_MARGIN_S, shown=f"agent job_lock {path}"))
    if reply.get("locked") is not True:
        return _not_taken(reply)
    session.hold(path, lease, host)  # (a lock found lost is reported on the inventory `host`)
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
    lock is free once this returns. JobLocksLost (the host out of the run) when the agent
    no longer held it: it went before, and another run may have acted on the job since."""
    session = connection.agent()
    session.check_locks()  # lost already (found by a heartbeat): never "not held", ok
    if path not in session.locks:
        return TaskResult(Status.OK, msg="not held by this run")
    # Still counted as held during the request: an agent found gone (a new one would hold
    # nothing) then makes it JobLocksLost, never a release of a lock that went long before.
    reply = cast("LockReply", session.call("job_unlock", {"path": path}, timeout=30))
    if reply.get("released"):
        session.locks.discard(path)
        return TaskResult(Status.OK, msg=f"released {reply['path']}")
    why = reply.get("why") or reply.get("error") or "not held"
    raise session.lose_locks(f"answered the release of the job lock at {path} with '{why}'")


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
    lease = lease_of(ctx.variables)  # a bad one fails the task: never a lock silently not taken
    try:
        taken = take_job_lock(ctx.connection, path, wait=0, holder=holder_of(ctx),
                              probe=ctx.check_mode, lease=lease, host=ctx.host)
    except ModuleFailure as exc:
        if "holder" in exc.data:
            raise  # another run restarts this job
        # No lock file can be made beside the pidfile (its folder is missing or not a
        # folder): the task's own checks name what is wrong there, and nothing can race on it.
        ctx.notes.append(f"job lock not taken: {str(exc).splitlines()[-1][:300]}")
        return
    if holds_job_lock(ctx.connection, path):
        ctx.notes.append(f"{taken.msg} (taken for this job, as no job_lock task did)")
