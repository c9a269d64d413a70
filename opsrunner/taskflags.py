"""Task keywords that are flags (run_once, become, ...), as the engine reads them; modules
never see the keywords."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opsrunner.errors import SourcePos, TemplateError
from opsrunner.playbook import Play, Task
from opsrunner.secrets import no_log_enabled
from opsrunner.templating import LazyVars, is_template, render, template_value
from opsrunner.templating.filters import to_bool


def flag(task: Task, key: str, variables: LazyVars, default: bool) -> bool:
    """A boolean task keyword (possibly templated); `default` when the task does not set it."""
    value = task.kw(key)
    if value is None:
        return default
    return to_bool(template_value(value, variables))


def flag_raw(task: Task, key: str) -> bool:
    """A boolean task keyword as written, without templating it."""
    value = task.kw(key)
    return bool(value) and str(value).lower() not in ("false", "no", "0")


def run_once(task: Task, variables: LazyVars) -> bool:
    return flag(task, "run_once", variables, False)


def task_no_log(play: Play, task: Task, variables: LazyVars | None) -> bool:
    """`no_log` of a task (the play's when the task sets none); hidden when in doubt: a
    template that cannot be rendered, a value that is no boolean (the task fails on it:
    no_log_refusal), or no variables to render it with."""
    value = task.kw("no_log", play.no_log)
    if variables is None and isinstance(value, str):
        return True
    try:
        return no_log_enabled(value, None if variables is None else lambda v: render(v, variables))
    except (TemplateError, ValueError):
        return True


def no_log_refusal(play: Play, task: Task, render_with: Callable[[Any], Any]) -> str | None:
    """Why the task's `no_log`, rendered by `render_with`, is no boolean (ansible-core fails on
    it), naming the key and the value as written; None when it is one. What `render_with`
    raises (a TemplateError, preflight's Deferred) is the caller's to judge."""
    value = task.kw("no_log", play.no_log)
    if value is None or isinstance(value, bool):
        return None
    try:
        no_log_enabled(value, render_with)
    except ValueError as exc:
        return no_log_problem(value, str(exc))
    return None


def no_log_problem(value: Any, why: str) -> str:
    return f"no_log {value!r}: {why}" if is_template(value) else f"no_log: {why}"


def no_log_at(play: Play, task: Task) -> SourcePos:
    """Where the task's `no_log` is written: the task's (or, inherited from a block, the task
    itself), else the play's."""
    if task.kw("no_log") is not None:
        return task.at("no_log")
    return play.no_log_pos or play.pos
