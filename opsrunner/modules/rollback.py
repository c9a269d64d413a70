"""rollback: put the job's last good run back (remote/rollback.py does it on the target) and
say in one line what failed and how the rollback went."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, cast

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.locks.job_lock import hold_for_job
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.verify import TIMEOUT_MARGIN_S, VerifyModule, status_line
from opsrunner.results import Status, TaskResult
from opsrunner.validation import load_schema

if TYPE_CHECKING:
    from opsrunner.remote.protocol_jobs import RollbackArgs, RollbackReply, VerifyArgs

#: Characters of a failure's diagnosis kept in the one-line message.
DIAGNOSIS_CHARS = 300


def failure_text(failed_task: str | None, failure: dict[str, Any] | None) -> str:
    """`TASK failed: DIAGNOSIS` from a failed task's registered result (ansible_failed_result):
    verify's diagnosis, else its message's first line; "" without a failed task."""
    if not failed_task:
        return ""
    result = failure or {}
    why = str(result.get("diagnosis") or result.get("msg") or "").strip()
    why = why.splitlines()[0] if why else "no message"
    if len(why) > DIAGNOSIS_CHARS:
        why = why[:DIAGNOSIS_CHARS] + "..."
    return f"{failed_task} failed: {why}"


def release_text(release: str | None, commit: str | None) -> str:
    if not release:
        return "the last good run's launch (no release: the code deployed in place stays)"
    return f"release {release} ({f'commit {commit}' if commit else 'no git commit'})"


def outcome_text(reply: RollbackReply, after_failure: bool = True) -> tuple[Status, str]:
    """The task's status and the rollback's part of the line (after_failure: it follows what
    failed, so a rollback that fails fails "too")."""
    outcome, where = reply.get("outcome"), release_text(reply.get("release"), reply.get("commit"))
    if outcome == "rolled_back":
        return Status.CHANGED, f"rolled back to {where}, pid {reply.get('pid')}, verified"
    if outcome == "nothing":
        back = (f"; current switched back from {reply.get('switched_from') or 'nothing'} to {reply.get('release')}"
                if "switched_from" in reply else "")
        return Status.CHANGED if back else Status.OK, (
            f"no rollback needed: the last good run ({where}, pid {reply.get('pid')}) is still running; nothing "
            f"was stopped{back}")
    if outcome == "no_good_run":
        return Status.OK, f"no rollback: {reply.get('why')}"
    if outcome == "would":
        stop = ", ".join(map(str, reply.get("stopped") or [])) or "nothing running"
        switch = ""
        if reply.get("release"):
            current = reply.get("switched_from")
            switch = (", current already points to it" if current == reply.get("release")
                      else f", switch current from {current or 'nothing'} to it")
        return Status.CHANGED, (f"would roll back to {where}: stop {stop}{switch}, start "
                                f"{shlex.join(reply.get('argv') or [])}"
                                + (f" in {reply['chdir']}" if reply.get("chdir") else "") + ", verify it")
    too = " too" if after_failure else ""
    if "release" not in reply:  # it failed before it knew where to go
        return Status.FAILED, f"rollback failed{too}: {reply.get('why')}"
    return Status.FAILED, f"rollback to {where} failed{too}: {reply.get('why')}"


class RollbackModule(Module):
    name = "rollback"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        known = set(load_schema("modules/verify")["properties"])  # (pidfile and record_good: set by the op)
        checks = args.get("verify") or {}
        unknown = sorted(set(checks) - known)
        if unknown:
            return [f"rollback verify: unknown verify argument(s) {', '.join(unknown)} "
                    f"(known: {', '.join(sorted(known))})"]
        return VerifyModule().sanity(dict(checks)) if checks else []

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        failed = failure_text(args.get("failed_task"), args.get("failure"))
        if not args.get("enabled", True):
            return _result(Status.OK, failed, "no rollback: it is off (rollback_on_failure: false)", {})
        too = " too" if failed else ""
        try:
            hold_for_job(ctx, str(args["pidfile"]))  # the lock covers the rollback as the restart
        except ModuleFailure as exc:  # another run holds the job: the line names it
            return _result(Status.FAILED, failed, f"rollback failed{too}: {' '.join(str(exc).split())}", {})
        request: RollbackArgs = {"pidfile": str(args["pidfile"]), "auto": bool(args.get("auto")),
                                 "grace": float(args.get("grace", 10)), "check_mode": ctx.check_mode}
        for key in ("release", "pattern"):
            if args.get(key):
                request[key] = str(args[key])
        if args.get("verify"):
            request["verify"] = cast("VerifyArgs", dict(args["verify"]))
        if ctx.timeout is not None:
            request["budget"] = max(ctx.timeout - TIMEOUT_MARGIN_S, ctx.timeout / 2)
        try:
            reply = ctx.agent(ops.ROLLBACK, request, timeout=ctx.timeout)
        except ModuleFailure as exc:
            return _result(Status.FAILED, failed, f"rollback failed{too}: {str(exc).splitlines()[0]}", {})
        status, text = outcome_text(reply, after_failure=bool(failed))
        data: dict[str, Any] = {k: reply.get(k) for k in ("outcome", "release", "commit", "pid", "stopped",
                                                           "switched_from", "verified", "took_s")}
        if reply.get("outcome") == "would":
            ctx.ledger.would_stop.update(reply.get("stopped") or [])
            ctx.ledger.would_launch.append(str(args["pidfile"]))
        detail = status_line(dict(reply["status"])) if reply.get("status") else ""
        return _result(status, failed, text, data, detail)


def _result(status: Status, failed: str, text: str, data: dict[str, Any], detail: str = "") -> TaskResult:
    summary = f"{failed}; {text}" if failed else text
    data["summary"] = summary
    msg = summary + (f"\n{detail}" if detail else "")
    return TaskResult(status, changed=status == Status.CHANGED, msg=msg, data=data)


MODULE = RollbackModule()
