"""verify: is the job really up? On failure, say what happened to it and show the log's end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from opsrunner.connections import ops
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_jobs import VerifyArgs, VerifyReply

#: A pidfile alone is a check: without a process count its job must be running (the `job` check).
CHECK_KEYS = ("processes", "min_processes", "pidfile", "log", "port", "gpu_min_memory_mb")
#: Seconds of a task timeout kept for starting the agent and bringing its verdict back.
TIMEOUT_MARGIN_S = 1.0
STATUS_KEYS = ("state", "pid", "release", "commit", "uptime_s", "log_size", "log_age_s", "last_line",
               "gpu_memory_mb")


def status_line(status: dict[str, Any]) -> str:
    """One line a person reads: state, pid, uptime, log size and age, last line, GPU memory."""
    parts = [str(status.get("state", "unknown"))]
    if status.get("pid"):
        parts.append(f"pid {status['pid']}")
    if status.get("release"):
        parts.append(f"release {status['release']}" + (f" (commit {status['commit']})" if status.get("commit") else ""))
    if status.get("uptime_s") is not None:
        parts.append(f"up {_duration(float(status['uptime_s']))}")
    if status.get("log_size") is not None:
        parts.append(f"log {status['log_size']} bytes")
    if status.get("log_age_s") is not None:
        parts.append(f"last grew {status['log_age_s']:.1f}s ago")
    gpus = status.get("gpu_memory_mb")
    if gpus:
        parts.append("GPU memory " + ", ".join(f"{k}: {v:g} MB" for k, v in sorted(gpus.items())))
    line = ", ".join(parts)
    if status.get("last_line"):
        line += f"; last line: {status['last_line']}"
    return line


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def process_listing(procs: list[Any]) -> str:
    """`PID CMDLINE; ...` of the counted processes, as the agent's diagnosis of a running job lists them."""
    return "; ".join(f"{p['pid']} {p['cmdline'][:150]}" for p in procs)


def failure_reason(reply: VerifyReply) -> str:
    """Why a verify failed, in one line: its diagnosis, unless that only lists the job's
    running processes (nothing happened to the job: a check failed, a ready line never came,
    a count was off); then the failed checks, as the message's first line says them, and how
    long they were checked: `log_regex: expected log matches /x/, got no match (checked for 30s)`."""
    diagnosis = str(reply.get("diagnosis") or "")
    failed = reply.get("failed") or []
    if failed and diagnosis in ("", "running: " + process_listing(reply.get("procs") or [])):
        waited = f" (checked for {reply['waited_s']:g}s)" if reply.get("waited_s") is not None else ""
        return "; ".join(f"{c[0]}: expected {c[2]}, got {c[3]}" for c in failed) + waited
    return diagnosis


def verify_budget(seconds_left: float) -> float:
    """What a verify request may spend of the seconds its task has left: the margin is kept for
    the reply to come back, and at least half is given to the checks when little is left."""
    return max(seconds_left - TIMEOUT_MARGIN_S, seconds_left / 2)


class VerifyModule(Module):
    name = "verify"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        if not any(k in args for k in CHECK_KEYS):
            return ["verify needs at least one check: processes, min_processes, pidfile (its job running), log, "
                    "port or gpu_min_memory_mb"]
        # verify.json says so for a verify task; rollback's `verify` is checked only here.
        if args.get("log") == "":
            return ["verify log '' should be non-empty: an empty log would skip every log check"]
        return []

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        if ctx.check_mode and (ctx.ledger.would_launch or ctx.ledger.would_stop):
            what = "launch" if ctx.ledger.would_launch else "stop"
            return TaskResult(Status.SKIPPED, msg=f"skipped in check mode: an earlier task would {what} the job "
                              "on this host, so there is no run to verify yet")
        # Its arguments are the op's: the schema (verify.json) has VerifyArgs' keys, checked
        # by tests/unit/test_agent_ops.py.
        request: VerifyArgs = cast("VerifyArgs", dict(args))
        if ctx.check_mode:
            request.pop("record_good", None)  # a dry run records nothing
        if ctx.timeout is not None:  # the task timeout bounds verify, whatever `within` says
            request["budget"] = verify_budget(ctx.timeout)
        reply = ctx.agent(ops.VERIFY, request, timeout=ctx.timeout)
        procs = reply.get("procs", [])
        status: dict[str, Any] = dict(reply.get("status") or {})
        data = {"checks": reply.get("checks", []), "pids": [p["pid"] for p in procs],
                "processes": len(procs), "log_size": reply.get("log_size")}
        data.update({k: status.get(k) for k in STATUS_KEYS})
        if reply.get("ok"):
            return _passed(request, reply, data, status_line(status))
        return _failure(args, reply, data, ctx.timeout)


def _passed(request: VerifyArgs, reply: VerifyReply, data: dict[str, Any], status: str) -> TaskResult:
    passed = ", ".join(f"{c[0]}={c[3]}" for c in reply["checks"])
    result = TaskResult(Status.OK, msg=f"all checks passed: {passed}\n{status}", data=data)
    good = reply.get("good")
    if good:
        data["good"] = good
        result.msg += "\nrecorded as the last good run" + (f" (release {good['release']})"
                                                          if good.get("release") else "")
    elif request.get("record_good"):  # asked for, and nothing recorded: say so
        why = ("the pidfile names no running job started by launch_detached" if request.get("pidfile")
               else "it needs a pidfile")
        result.warnings.append(f"record_good: nothing was recorded as the last good run: {why}")
    return result


def _failure(args: dict[str, Any], reply: VerifyReply, data: dict[str, Any], timeout: float | None) -> TaskResult:
    failed = "; ".join(f"{c[0]}: expected {c[2]}, got {c[3]}" for c in reply["failed"])
    msg = ""
    if reply.get("cut_short"):
        msg = f"verify stopped at the task timeout ({timeout:g}s) after {reply.get('waited_s', 0):g}s\n"
    msg += f"{failed}\ndiagnosis: {reply['diagnosis']}"
    procs = reply.get("procs", [])
    if procs:
        msg += "\nprocesses: " + process_listing(procs)
    if args.get("log"):
        tail = reply.get("log_tail") or "(empty or missing)"
        msg += f"\nlast lines of {args['log']}:\n" + "\n".join("  | " + ln for ln in tail.splitlines())
    data["diagnosis"] = reply["diagnosis"]
    data["reason"] = failure_reason(reply)  # the one line a restart's rollback and its fail message say
    data["log_tail"] = reply.get("log_tail", "")
    return TaskResult(Status.TIMED_OUT if reply.get("cut_short") else Status.FAILED, msg=msg, data=data)


MODULE = VerifyModule()
