"""command: run a program with arguments on the target, no shell involved."""

from __future__ import annotations

import shlex
from functools import lru_cache
from typing import Any

from opsrunner.modules.base import Module, TaskContext, command_result
from opsrunner.results import CommandResult, Status, TaskResult


def run_argv(ctx: TaskContext, argv: list[str], args: dict[str, Any], script: str | None = None) -> CommandResult:
    """Run argv (or, with `script`, the shell argv running it); script and env go on stdin."""
    env = {str(k): _env_str(v) for k, v in (args.get("env") or {}).items()}
    stdin = args.get("stdin")
    return ctx.connection.run_command(
        argv,
        stdin=stdin.encode() if isinstance(stdin, str) else None,
        env=env or None,
        cwd=args.get("chdir"),
        timeout=ctx.timeout,
        script=script,
        notes=ctx.notes,
    )


def _env_str(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


#: Whether a path exists on the target, a glob pattern (`creates: out/*.log`) as ansible-core reads it.
_EXISTS = 'for p in $1; do [ -e "$p" ] && exit 0; done; exit 1'


def _matches(ctx: TaskContext, path: str) -> bool:
    argv = ["sh", "-c", _EXISTS, "sh", path] if any(c in path for c in "*?[") else ["test", "-e", path]
    return ctx.connection.run_command(argv, timeout=ctx.timeout, notes=ctx.notes).rc == 0


def precondition_skip(ctx: TaskContext, args: dict[str, Any]) -> TaskResult | None:
    """`creates`/`removes`: decide on the target whether the command needs to run at all."""
    creates, removes = args.get("creates"), args.get("removes")
    if not creates and not removes:
        if ctx.check_mode:
            return TaskResult(Status.SKIPPED, msg="skipped in check mode: a command's effect "
                              "cannot be predicted", check_mode_unsupported=True)
        return None
    # As ansible-core: the skip reports rc 0 and says why on stdout
    if creates and _matches(ctx, str(creates)):
        why = f"skipped, since {creates} exists"
        return TaskResult(Status.OK, msg=why, rc=0, stdout=why)
    if removes and not _matches(ctx, str(removes)):
        why = f"skipped, since {removes} does not exist"
        return TaskResult(Status.OK, msg=why, rc=0, stdout=why)
    if ctx.check_mode:
        return TaskResult(Status.CHANGED, changed=True, msg="would run (check mode)")
    return None


@lru_cache(maxsize=1024)
def _words(cmd: str) -> tuple[str, ...]:
    """shlex's split, once per command line: preflight and the run split each task's (and hosts
    mostly share it); ~2% of a task's controller time."""
    return tuple(shlex.split(cmd))


class CommandModule(Module):
    name = "command"

    def argv(self, args: dict[str, Any]) -> list[str]:
        return [str(a) for a in args["argv"]] if "argv" in args else list(_words(args["cmd"]))

    def sanity(self, args: dict[str, Any]) -> list[str]:
        """A command line that splits into words, the first of them a program: caught here, on
        the controller, where the target would fail it with an error of its own."""
        try:
            words = self.argv(args)
        except ValueError as exc:
            return [f"command cmd cannot be split into words: {exc} (quote with the quote filter)"]
        if not words:
            return [f"command cmd {args.get('cmd')!r} has no words: there is no program to run"]
        if not words[0]:
            return ["command's program (its first word) is empty"]
        return []

    def script(self, args: dict[str, Any]) -> str | None:
        """The shell script to run (shell), or None: argv is run directly (command)."""
        return None

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        skipped = precondition_skip(ctx, args)
        if skipped:
            return skipped
        argv, script = self.argv(args), self.script(args)
        result = command_result(run_argv(ctx, argv, args, script))
        result.data["cmd"] = script if script is not None else shlex.join(argv)
        return result


MODULE = CommandModule()
