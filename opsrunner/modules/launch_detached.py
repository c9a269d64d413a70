"""launch_detached: start a job that outlives the command, the connection and the exec session."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from opsrunner import interrupts
from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.locks.job_lock import hold_for_job
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.own_session import StartedJob, end_not_seen, start_in_own_session
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import TailArgs
    from opsrunner.remote.protocol_jobs import ExitRecord, LaunchArgs, LaunchReply

_SHELL_SYNTAX = re.compile(r"[;&|<>()$`\\\n*?\[\]{}~#]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: First words that only a shell understands: builtins that change the shell itself, and keywords.
SHELL_WORDS = frozenset({
    "exec", "cd", "export", ".", "source", "ulimit", "set", "unset", "umask", "eval", "trap", "alias",
    "readonly", "local", "declare", "typeset", "shift", "wait", "command", "builtin", "read", "times",
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in",
    "function", "select", "time", "!", "{", "}", "[[", "]]",
})


def command_argv(command: str) -> tuple[list[str], dict[str, str]]:
    """A plain `program args...` runs without a shell (so the pid is the job's); shell syntax,
    builtins and keywords run under /bin/sh -c, which execs the last command where it can."""
    shell = (["/bin/sh", "-c", command], dict[str, str]())
    if _SHELL_SYNTAX.search(command):
        return shell
    try:
        words = shlex.split(command)
    except ValueError:
        return shell
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if not words or words[0] in SHELL_WORDS:
        return shell
    return words, env


class LaunchDetachedModule(Module):
    name = "launch_detached"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        request, argv = _request(ctx, args)
        if args.get("check_only"):
            return _check_only(ctx, request)
        hold_for_job(ctx, args.get("pidfile"))  # the job this task changes is locked by this run
        if not ctx.check_mode:
            interrupts.so_far(ctx.host, ctx.task, _interrupted_text(args))
        # Behind a wrapper chain the launch gets an exec session of its own (own_session.py).
        reply, survival = start_in_own_session(ctx, ops.LAUNCH, request, None, _fresh_job, "launched")
        data: dict[str, Any] = {k: v for k, v in reply.items()
                                if k in ("pid", "pgid", "sid", "log", "exit_file", "cmdline", "exited")}
        if reply.get("already_running"):
            return TaskResult(Status.OK, msg=f"already running as pid {reply['pid']} "
                              f"(from {args['pidfile']}); not starting a second copy", data=data)
        if ctx.check_mode:
            ctx.ledger.would_launch.append(str(args.get("pidfile", "")))
            return TaskResult(Status.CHANGED, changed=True, data=data,
                              msg=f"would launch{ctx.ledger.stopping_note()}: {shlex.join(argv)}")
        if reply.get("exited"):
            return _ended_at_once(reply, args)
        if survival.exited:  # gone with its session, but it exited by itself: no fault of the chain
            return _ended_at_once(_with_exit(ctx, reply, survival.exited, args), args)
        if survival.gone:
            return TaskResult(Status.FAILED, msg=survival.gone, data=data)
        log = f", log {reply['log']}" if reply.get("log") else ""
        result = TaskResult(Status.CHANGED, changed=True, data=data,
                            msg=f"launched pid {reply['pid']} in its own session{log}")
        if survival.unseen:  # then what the chain does at a session's end was not seen: say so
            result.warnings.append(end_not_seen("the launch's"))
        return result


def _request(ctx: TaskContext, args: dict[str, Any]) -> tuple[LaunchArgs, list[str]]:
    """The launch's request to the target, and the argv it runs."""
    if "argv" in args:
        argv, env = [str(a) for a in args["argv"]], dict[str, str]()
    else:
        argv, env = command_argv(args["command"])
    env.update({str(k): str(v) for k, v in (args.get("env") or {}).items()})
    request: LaunchArgs = {"argv": argv, "env": env, "check_mode": ctx.check_mode}
    if ctx.check_mode:
        request["would_stop"] = sorted(ctx.ledger.would_stop)
        request["would_exist"] = list(ctx.ledger.would_create)
    for key in ("chdir", "log", "pidfile", "umask", "release_link"):
        if key in args:
            request[key] = str(args[key])
    if "settle" in args:
        request["settle"] = float(args["settle"])
    return request, argv


def _check_only(ctx: TaskContext, request: LaunchArgs) -> TaskResult:
    """The launch's own checks on the target, and nothing else: a plain request (it starts
    nothing, so no exec session of its own) that makes, writes and stops nothing, so it takes
    no job lock either (that would make a lock file; the stop that follows takes it). Its
    data says it was only a check, and which job runs now: a restart's rescue says that one
    was left running."""
    request["check_only"] = True
    data: dict[str, Any] = {"check_only": True}
    try:
        reply = ctx.agent(ops.LAUNCH, request)
    except ModuleFailure as exc:
        data["running"] = exc.data.get("running")
        return TaskResult(Status.FAILED, msg=str(exc), data=data)
    data.update(running=reply.get("running"), program=reply.get("program"))
    return TaskResult(Status.OK, msg=f"the job can start here: {reply.get('program')}", data=data)


def _interrupted_text(args: dict[str, Any]) -> str:
    """An interrupted run's record of this launch, should it be cut short before the reply:
    the agent then ends what the request started, but a job may have started (and written to
    its log) first, and only the target's records can tell."""
    if not args.get("pidfile"):
        return ("launch interrupted before the target answered: whether the job started is not known, and with no "
                "pidfile nothing on the target records it")
    return (f"launch interrupted before the target answered: whether the job started is not known here; the launch "
            f"record beside {args['pidfile']} says what the target had done (the job's pid and start time, or that "
            "it had started none yet), and the next verify or status reads it")


def _fresh_job(reply: LaunchReply) -> StartedJob:
    """The job this launch started; no pid where it started none (one was running already, or
    it ended at once: its exit status is the verdict then)."""
    if reply.get("already_running") or reply.get("exited"):
        return StartedJob(None)
    return StartedJob(reply.get("pid"), reply.get("start"), reply.get("exit_file"))


def _with_exit(ctx: TaskContext, reply: LaunchReply, record: ExitRecord, args: dict[str, Any]) -> LaunchReply:
    """The reply of a launch whose job ended by itself before its exec session did (a launch
    with `settle: 0` does not wait to see), with its exit record and the log's last lines."""
    ended: LaunchReply = {**reply, "exited": record}
    if args.get("log"):
        tail_args: TailArgs = {"log": str(reply.get("log") or args["log"]), "pidfile": args.get("pidfile"),
                               "lines": 20}
        ended["log_tail"] = ctx.agent(ops.TAIL, tail_args).get("text", "")
    return ended


def _ended_at_once(reply: LaunchReply, args: dict[str, Any]) -> TaskResult:
    """A job that ended before the launch returned: its exit status is the verdict."""
    ended = reply["exited"]
    data: dict[str, Any] = {k: v for k, v in reply.items() if k in ("pid", "log", "exit_file", "exited")}
    pid = reply["pid"]
    if ended.get("unknown"):
        how = "ended at once; its exit status was not recorded" + ("" if args.get("pidfile") else " (no pidfile)")
        ok = False
    elif ended.get("signal"):
        how, ok = f"was killed at once by signal {ended['signal']}", False
    else:
        how, ok = f"exited at once with code {ended.get('returncode')}", ended.get("returncode") == 0
    msg = f"launched pid {pid}; it {how}"
    if not ok:
        tail = reply.get("log_tail") or ""
        if args.get("log"):
            msg += f"\nlast lines of {args['log']}:\n" + ("\n".join("  | " + ln for ln in tail.splitlines())
                                                         or "  (empty)")
        return TaskResult(Status.FAILED, msg=msg, data=data)
    return TaskResult(Status.CHANGED, changed=True, msg=msg, data=data)


MODULE = LaunchDetachedModule()
