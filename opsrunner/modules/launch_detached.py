"""launch_detached: start a job that outlives the command, the connection and the exec session."""

from __future__ import annotations

import re
import shlex
from typing import Any

from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

_SHELL_SYNTAX = re.compile(r"[;&|<>()$`\\\n*?\[\]{}~#]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_argv(command: str) -> tuple[list[str], dict[str, str]]:
    """A plain command runs without a shell (so the pid is the job's); shell syntax needs /bin/sh."""
    if _SHELL_SYNTAX.search(command):
        return ["/bin/sh", "-c", command], {}
    try:
        words = shlex.split(command)
    except ValueError:
        return ["/bin/sh", "-c", command], {}
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return (words, env) if words else (["/bin/sh", "-c", command], {})


class LaunchDetachedModule(Module):
    name = "launch_detached"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        if "argv" in args:
            argv, env = [str(a) for a in args["argv"]], dict[str, str]()
        else:
            argv, env = command_argv(args["command"])
        env.update({str(k): str(v) for k, v in (args.get("env") or {}).items()})
        request: dict[str, Any] = {"argv": argv, "env": env, "check_mode": ctx.check_mode}
        for key in ("chdir", "log", "pidfile", "umask"):
            if key in args:
                request[key] = args[key]
        reply = ctx.agent("launch", request)
        keys = ("pid", "pgid", "sid", "log", "exit_file", "cmdline")
        data: dict[str, Any] = {k: reply[k] for k in keys if k in reply}
        if reply.get("already_running"):
            return TaskResult(Status.OK, msg=f"already running as pid {reply['pid']} "
                              f"(from {args['pidfile']}); not starting a second copy", data=data)
        if ctx.check_mode:
            return TaskResult(Status.CHANGED, changed=True, msg=f"would launch: {shlex.join(argv)}", data=data)
        log = f", log {reply['log']}" if reply.get("log") else ""
        return TaskResult(Status.CHANGED, changed=True, data=data,
                          msg=f"launched pid {reply['pid']} in its own session{log}")


MODULE = LaunchDetachedModule()
