"""Task keywords that are flags (run_once, become, ...), as the engine reads them; modules
never see the keywords."""

from __future__ import annotations

from opsrunner.errors import TemplateError
from opsrunner.playbook import Play, Task
from opsrunner.secrets import no_log_enabled
from opsrunner.templating import LazyVars, render, template_value
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
    template that cannot be rendered, or no variables to render it with."""
    value = task.kw("no_log", play.no_log)
    if variables is None and isinstance(value, str):
        return True
    try:
        return no_log_enabled(value, None if variables is None else lambda v: render(v, variables))
    except TemplateError:
        return True
