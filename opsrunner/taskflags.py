"""Task keywords that are flags (run_once, become, ...), as the engine reads them; modules
never see the keywords."""

from __future__ import annotations

from opsrunner.playbook import Task
from opsrunner.templating import LazyVars, template_value
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
