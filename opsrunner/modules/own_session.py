"""Steps that start a job behind a wrapper chain run in an exec session of their own.

A chain may end what a session leaves behind when the session ends (an exec tool that cleans
up after itself, a PID namespace or cgroup per session). A job started in the run's own
long-lived session would look alive to every check the run makes and die when the run ends.
So a launching step gets a session of its own, ended as soon as the step returns: whatever the
chain does at a session's end happens then, and the run's own session looks for the job, as
the next task or run will see it. Used by launch_detached and rollback."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from opsrunner.connections import ops
from opsrunner.connections.become import BecomeLayer
from opsrunner.connections.streams import AGENT_EXIT_WAIT_S

if TYPE_CHECKING:
    from opsrunner.connections.ops import AgentOp, ArgsT, ReplyT
    from opsrunner.modules.base import TaskContext
    from opsrunner.remote.protocol_files import ReadArgs
    from opsrunner.remote.protocol_host import ExecArgs
    from opsrunner.remote.protocol_jobs import ExitRecord


@dataclass(frozen=True)
class StartedJob:
    """The job a step started: its pid (None: it started none), its start time where known,
    and the exit record its supervisor writes when it ends."""

    pid: int | None
    start: int | None = None
    exit_file: str | None = None


@dataclass(frozen=True)
class Survival:
    """What a step's own exec session showed of the job the step started."""

    #: Why the job is gone once its session ended (the chain ends what a session leaves), or None.
    gone: str | None = None
    #: The session had not ended when the run stopped waiting: what the chain does then was not seen.
    unseen: bool = False
    #: The job is gone, but it ended by itself, with an exit code (its exit record): not the chain's doing.
    exited: ExitRecord | None = None


def start_in_own_session(ctx: TaskContext, op: AgentOp[ArgsT, ReplyT], request: ArgsT, timeout: float | None,
                         started: Callable[[ReplyT], StartedJob], what: str) -> tuple[ReplyT, Survival]:
    """`op`, a step that may start a job; behind a wrapper chain in an exec session of its own,
    ended at once, after which the job (`started(reply)`) is looked for from the run's
    session. `what` starts the message of a job gone ("launched", "started")."""
    if not needs_own_session(ctx):
        return ctx.agent(op, request, timeout=timeout), Survival()
    reply, ended = call_in_own_session(ctx, op, request, timeout)
    job = started(reply)
    if not job.pid:
        return reply, Survival()
    if not ended:
        return reply, Survival(unseen=True)
    return reply, survival_of(ctx, job, what)


def needs_own_session(ctx: TaskContext) -> bool:
    """Whether a step that starts a job must run in a session of its own: behind a wrapper
    chain, when it really starts one (not in check mode)."""
    return bool(ctx.connection.spec.wrapper) and not ctx.check_mode


def call_in_own_session(ctx: TaskContext, op: AgentOp[ArgsT, ReplyT], request: ArgsT,
                        timeout: float | None = None) -> tuple[ReplyT, bool]:
    """`op` on an agent in an exec session of its own, ended as soon as it returns. With the
    reply: whether the session was seen to end (the chain's exit came back within
    streams.AGENT_EXIT_WAIT_S); when it was not, what the chain does at its end was not seen."""
    what = f"the reply to '{op.name}' from a session of its own"
    ctx.connection.confirm_job_locks(what)  # (job locks are the run's agent's: see base.py)
    session = ctx.connection.session_agent()
    try:
        reply = ctx.agent(op, request, timeout=timeout, session=session)
    except BaseException:
        session.end()
        raise
    ended = session.end()
    ctx.connection.confirm_job_locks(what)
    return reply, ended


def survival_of(ctx: TaskContext, job: StartedJob, what: str = "launched") -> Survival:
    """Whether a job started behind the wrapper chain still runs once its own exec session has
    ended, seen from the run's session; the start time tells the job from a process that has
    its pid there (a chain with a PID namespace per session numbers each session's processes
    anew). A job gone whose exit record gives an exit code ended by itself (it exited at once,
    or before its session ended): that is the verdict, not the chain. Gone without one (or
    killed by a signal, as the chain's kill looks), the chain ended it."""
    if not job.pid or _still_runs(ctx, job.pid, job.start):
        return Survival()
    record = _exited_by_itself(ctx, job)
    if record is not None:
        return Survival(exited=record)
    chain = ", then ".join(shlex.join(layer.prefix) if not isinstance(layer, BecomeLayer) else f"become {layer.method}"
                           for layer in ctx.connection.spec.wrapper)
    return Survival(gone=f"{what} pid {job.pid}, but it was gone once its exec session ended: the wrapper chain "
                         f"({chain}) ends what a session leaves behind, so nothing launched through it lives on. "
                         "Start the job through something that outlives the session (the container's own "
                         "service manager, for example), or a hop that leaves detached processes alone")


def _exited_by_itself(ctx: TaskContext, job: StartedJob) -> ExitRecord | None:
    """The job's exit record where it names the job and an exit code, else None."""
    if not job.exit_file:
        return None
    read: ReadArgs = {"paths": [job.exit_file], "limit": 65536}
    text = ctx.agent(ops.READ, read)["contents"].get(job.exit_file)
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("pid") != job.pid or not isinstance(record.get("returncode"), int):
        return None
    if job.start is not None and record.get("start") not in (None, job.start):
        return None  # an earlier job's, with the pid this one has now
    return cast("ExitRecord", record)


def _still_runs(ctx: TaskContext, pid: int, start: int | None) -> bool:
    probe: ExecArgs = {"argv": ["cat", f"/proc/{pid}/stat"], "cwd": None, "timeout": None}
    seen = ctx.agent(ops.EXEC, probe)
    if seen["rc"] != 0:
        return False
    fields = seen["stdout"].rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    return start is None or (len(fields) > 19 and fields[19] == str(start))


def end_not_seen(what: str) -> str:
    """The warning for a step whose own session had not ended when the run stopped waiting."""
    return (f"{what} own exec session had not ended {AGENT_EXIT_WAIT_S:g}s after it was closed: whether the "
            "job outlives its session is not known")
