"""The error hierarchy. Every error carries what failed: a source position or a result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opsrunner.results import CommandResult


@dataclass(frozen=True)
class SourcePos:
    """A position in a source file (1-based line and column)."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.col}"
        return self.file


@dataclass(frozen=True)
class GivenPos(SourcePos):
    """Where an -e of the command line gave a variable: `-e name=value` (the value as typed, in
    `file`), `-e @vars.yml:3:1`. Shown as the command line is: a secret-named variable's value
    hidden however short (Masker.mask_problem), on one line."""


@dataclass(frozen=True)
class Quoted:
    """The value a problem's message quotes (coercion.show_value) and the variables it was read
    through (`{{ api_token }}`, followed): where one of them is secret-named, the value is
    hidden by that name, however short (Masker.mask_problem)."""

    names: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class Problem:
    """One validation finding: where, what, and the key path at fault."""

    pos: SourcePos
    message: str
    key_path: str = ""
    #: Told where a variable's bad value was set: the same problem told where it is used (a
    #: task's argument). Hosts that each set the value in their own file have one mistake.
    used: Problem | None = None
    #: The variable's value the message quotes, where it names one: not part of its identity,
    #: nor of its repr (a secret's value, however short).
    quoted: Quoted | None = field(default=None, compare=False, repr=False)

    def at_use(self) -> Problem:
        return self.used or self

    def __str__(self) -> str:
        where = f" (at {_one_line(self.key_path)})" if self.key_path else ""
        return f"{_one_line(str(self.pos))}: {_one_line(self.message)}{where}"


def _one_line(text: str) -> str:
    """A problem is one line of output, whatever a key or a template held (newlines escaped)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class OpsrunnerError(Exception):
    """Root of every error opsrunner raises on purpose."""

    exit_code = 250


class ValidationError(OpsrunnerError):
    """Bad input (playbook, inventory, vars, templates): exit code 4, no host touched."""

    exit_code = 4

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class UsageError(OpsrunnerError):
    """Bad command-line options: exit code 5."""

    exit_code = 5


class ArgumentsError(UsageError):
    """The command line does not parse (an unknown option, a missing argument): exit code 2,
    as ansible-playbook's (its argument parser's)."""

    exit_code = 2


class CommandError(OpsrunnerError):
    """A command other than `play` could not do its job (a missing log, an unreadable
    history database): exit code 1, Ansible's general error."""

    exit_code = 1


class TemplateError(OpsrunnerError):
    """A template failed to render (undefined variable, bad expression) at run time."""

    exit_code = 4

    def __init__(self, message: str, pos: SourcePos | None = None, key_path: str = "",
                 in_file: SourcePos | None = None) -> None:
        self.pos = pos
        self.key_path = key_path
        #: Where in a template file it failed (its line, or the file alone); `detail` says what.
        self.in_file = in_file
        self.detail = message
        self.bare_message = f"{_file_line(in_file)}: {message}" if in_file else message
        prefix = f"{pos}: " if pos else ""
        where = f" (at {key_path})" if key_path else ""
        super().__init__(f"{prefix}{self.bare_message}{where}")


def _file_line(pos: SourcePos) -> str:
    """`file:line` (a template file's line has no column here), or the file alone."""
    return f"{pos.file}:{pos.line}" if pos.line else pos.file


class UndefinedVariable(TemplateError):
    """A template read a variable that is not defined; `hint` is Jinja's word for it."""

    def __init__(self, hint: str, in_file: SourcePos | None = None) -> None:
        self.hint = hint
        super().__init__(f"undefined variable: {hint}", in_file=in_file)


class ConnectionFailed(OpsrunnerError):
    """The host could not be reached: the host becomes unreachable."""

    exit_code = 3


class CommandFailed(OpsrunnerError):
    """A remote command failed; carries the result that failed."""

    exit_code = 2

    def __init__(self, result: CommandResult, message: str = "") -> None:
        self.result = result
        super().__init__(message or f"command exited with {result.rc}")


class ModuleFailure(OpsrunnerError):
    """A module decided the task failed; carries its message and optional data."""

    exit_code = 2

    def __init__(self, message: str, data: dict[str, object] | None = None) -> None:
        self.data = data or {}
        super().__init__(message)


class Terminated(KeyboardInterrupt):
    """opsrunner received SIGTERM: stopped like Ctrl-C (recap, JSON recap event), exit 143."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        self.signal_name = signal_name
        super().__init__(signal_name)
