"""What a module is, and the context a module runs in."""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from opsrunner.connections.agent import AgentSession
from opsrunner.connections.base import Connection
from opsrunner.connections.ops import AgentOp, ArgsT, ReplyT
from opsrunner.errors import ModuleFailure
from opsrunner.ledger import CheckLedger
from opsrunner.modules.info import module_info
from opsrunner.results import CommandResult, Status, TaskResult
from opsrunner.tasks import Task


@dataclass
class TaskContext:
    """Everything a module may use while running one task on one host."""

    host: str
    task: Task
    connection: Connection
    variables: Mapping[str, Any]
    check_mode: bool = False
    diff_mode: bool = False
    timeout: float | None = None
    notes: list[str] = field(default_factory=list)
    ledger: CheckLedger = field(default_factory=CheckLedger)

    def resolve_local(self, path: str) -> Path:
        """A controller-side path: absolute, or found in the role's folder for this module's files
        (files/; templates/, vars/: ModuleInfo.local_folder), then the playbook dir."""
        return self.task.local_path(path, module_info(self.task.module).local_folder)

    def agent(self, op: AgentOp[ArgsT, ReplyT], request: ArgsT, timeout: float | None = None,
              payload: IO[bytes] | None = None, session: AgentSession | None = None) -> ReplyT:
        """Run one operation on the target's long-lived agent (remote/); return its reply, typed
        as the op's (connections/ops.py). A reply with an error raises ModuleFailure, one
        past the deadline TimedOut.

        The agent is started on this connection's first request and kept; if it was lost,
        it is started again here and a note says so. `session`: another agent to ask instead
        (Connection.session_agent)."""
        limit = timeout if timeout is not None else self.timeout
        start = time.monotonic()
        reply = (session or self.connection.agent()).call(op.name, cast("dict[str, Any]", request), timeout=limit,
                                                          payload=payload, notes=self.notes)
        if reply.get("timed_out"):
            raise TimedOut(CommandResult(f"agent {op.name}", 124, b"", str(reply.get("error", "")).encode(),
                                         time.monotonic() - start, timed_out=True))
        if reply.get("error"):
            raise ModuleFailure(str(reply["error"]), reply)
        return cast(ReplyT, reply)


class TimedOut(Exception):
    """A command hit the task timeout; carries the result."""

    def __init__(self, result: CommandResult) -> None:
        self.result = result
        super().__init__(f"timed out after {result.duration_s:.1f}s")


class Module(abc.ABC):
    """A task type. Subclasses live one per file and set `name`."""

    name: str = ""

    @abc.abstractmethod
    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        """Do (or, in check mode, predict) the work; raise ModuleFailure on failure."""

    def sanity(self, args: dict[str, Any]) -> list[str]:
        """Problems visible in the rendered arguments before anything runs (preflight)."""
        return []


def command_result(res: CommandResult, *, changed: bool = True, msg: str = "") -> TaskResult:
    """A TaskResult for a plain command: failed on non-zero rc, timed_out on timeout. A command
    that ran is changed even when it failed, as in ansible-core (a suppressed failure counts)."""
    if res.timed_out:
        status = Status.TIMED_OUT
        msg = msg or f"timed out after {res.duration_s:.1f}s; the command and its processes were killed"
    elif res.rc != 0:
        status = Status.FAILED
        msg = msg or f"non-zero return code {res.rc}"
    else:
        status = Status.CHANGED if changed else Status.OK
    return TaskResult(status=status, msg=msg, changed=changed and status in (Status.CHANGED, Status.FAILED),
                      rc=res.rc, stdout=res.stdout.removesuffix("\n"),
                      stderr=res.stderr.removesuffix("\n"), warnings=list(res.warnings),
                      data={"cmd": res.command, "delta": round(res.duration_s, 3)})
