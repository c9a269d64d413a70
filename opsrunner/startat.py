"""--start-at-task and --step: where a run starts, and confirming each task at a terminal.

--start-at-task NAME (a name or a glob), as ansible-playbook: plays before the one holding
the first matching task run nothing (not even fact gathering); in that play, tasks before
it are skipped; later plays run whole. Candidates are the tasks a host walks to without a
failure: block and always tasks, not rescue tasks nor handlers. Unlike ansible-playbook,
which runs every play's tasks as skipped and says "No matching task" at the end, a name that
matches no task is refused (exit 4) before any host is touched. include_tasks files are read
at load time in opsrunner, so their tasks can be started at too.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from opsrunner.errors import Problem, SourcePos, ValidationError
from opsrunner.playbook import Block, Node, Play, Playbook, Task


def _candidates(nodes: Iterable[Node]) -> list[Task]:
    out: list[Task] = []
    for node in nodes:
        if isinstance(node, Block):
            out += _candidates(node.block) + _candidates(node.always)
        else:
            out.append(node)
    return out


def matches(task: Task, pattern: str) -> bool:
    return task.name == pattern or fnmatch.fnmatchcase(task.name, pattern)


def start_task(play: Play, pattern: str) -> Task | None:
    """The play's first task --start-at-task PATTERN names, or None."""
    return next((t for t in _candidates(play.tasks) if matches(t, pattern)), None)


def check_start_at(playbook: Playbook, pattern: str) -> None:
    """ValidationError (exit 4) when no play has a task that PATTERN names."""
    if not any(start_task(play, pattern) for play in playbook.plays):
        raise ValidationError([Problem(SourcePos(str(playbook.path)),
                                       f"--start-at-task: no task named '{pattern}' (handlers and rescue "
                                       "tasks cannot be started at)")])


@dataclass
class StartAt:
    """The run's --start-at-task state: pending until the play holding the task starts."""

    pattern: str | None

    def skipped_in(self, play: Play, order: list[Task]) -> frozenset[int] | None:
        """ids of the tasks of `play` to skip; None when the whole play runs nothing."""
        if self.pattern is None:
            return frozenset()
        first = start_task(play, self.pattern)
        if first is None:
            return None
        self.pattern = None
        index = next(i for i, t in enumerate(order) if t is first)
        return frozenset(id(t) for t in order[:index])


class TerminalStep:
    """--step: before each task, `Perform task: TASK: NAME (N)o/(y)es/(c)ontinue: ` at the
    terminal, as ansible-playbook asks it; `c` runs it and every later task without asking."""

    def __init__(self, tty_in: IO[str] | None = None, tty_out: IO[str] | None = None) -> None:
        self.tty_in = tty_in or sys.stdin
        # The question goes where the user looks: stdout, unless it is a file or a pipe (--json-events -).
        self.tty_out = tty_out or (sys.stdout if sys.stdout.isatty() else sys.stderr)
        self.asking = True
        if not self.tty_in.isatty():
            raise ValidationError([Problem(SourcePos("<--step>"), "--step asks before each task and needs a "
                                           "terminal on standard input; none is attached")])

    def confirm(self, title: str) -> bool:
        if not self.asking:
            return True
        self.tty_out.write(f"Perform task: {title} (N)o/(y)es/(c)ontinue: ")
        self.tty_out.flush()
        answer = self.tty_in.readline().strip().lower()
        if answer in ("c", "continue"):
            self.asking = False
        return answer in ("y", "yes", "c", "continue")
