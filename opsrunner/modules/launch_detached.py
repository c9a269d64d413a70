"""launch_detached: start a job that outlives the command, the connection and the exec session."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.connections.become import BecomeLayer
from opsrunner.connections.streams import AGENT_EXIT_WAIT_S
from opsrunner.locks.job_lock import hold_for_job
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_host import ExecArgs
    from opsrunner.remote.protocol_jobs import LaunchArgs, LaunchReply

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
        hold_for_job(ctx, args.get("pidfile"))  # the job this task changes is locked by this run
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
        # Behind a wrapper chain the launch gets an exec session of its own (_launch_alone).
        alone = bool(ctx.connection.spec.wrapper) and not ctx.check_mode
        reply, session_ended = _launch_alone(ctx, request) if alone else (ctx.agent(ops.LAUNCH, request), True)
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
        gone = _gone_with_its_session(ctx, reply) if alone and session_ended else None
        if gone:
            return TaskResult(Status.FAILED, msg=gone, data=data)
        log = f", log {reply['log']}" if reply.get("log") else ""
        result = TaskResult(Status.CHANGED, changed=True, data=data,
                            msg=f"launched pid {reply['pid']} in its own session{log}")
        if not session_ended:  # then what the chain does at a session's end was not seen: say so
            result.warnings.append(f"the launch's own exec session had not ended {AGENT_EXIT_WAIT_S:g}s after "
                                   "it was closed: whether the job outlives its session is not known")
        return result


def _launch_alone(ctx: TaskContext, request: LaunchArgs) -> tuple[LaunchReply, bool]:
    """The launch in an exec session of its own, ended as soon as the launch returns: whatever
    the wrapper chain does when a session ends (an exec tool that ends what the session left
    behind, a PID namespace that dies with it) it does now, and the run's own session then
    looks for the job (_gone_with_its_session). With the reply: whether the session was seen
    to end (the chain's exit came back within streams.AGENT_EXIT_WAIT_S)."""
    session = ctx.connection.session_agent()
    try:
        reply = ctx.agent(ops.LAUNCH, request, session=session)
    except BaseException:
        session.end()
        raise
    return reply, session.end()  # and whether the session was seen to end


def _gone_with_its_session(ctx: TaskContext, reply: LaunchReply) -> str | None:
    """Why a job launched behind a wrapper chain is not running once its launch session has
    ended, or None. Seen from another exec session, as the next task or run will see it."""
    if not reply.get("pid"):
        return None
    pid = reply["pid"]
    probe: ExecArgs = {"argv": ["test", "-e", f"/proc/{pid}"], "cwd": None, "timeout": None}
    if ctx.agent(ops.EXEC, probe)["rc"] == 0:
        return None
    chain = ", then ".join(shlex.join(layer.prefix) if not isinstance(layer, BecomeLayer) else f"become {layer.method}"
                           for layer in ctx.connection.spec.wrapper)
    return (f"launched pid {pid}, but it was gone once its exec session ended: the wrapper chain "
            f"({chain}) ends what a session leaves behind, so nothing launched through it lives on. "
            "Start the job through something that outlives the session (the container's own "
            "service manager, for example), or a hop that leaves detached processes alone")


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
