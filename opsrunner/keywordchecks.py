"""Preflight's checks of task keywords that name no argument: the job lock's lease
(`job_lock_lease`) on a task that takes a lock, `delegate_to` and a templated `environment`.
Each is rendered with what preflight knows (`render`, raising `deferred` where only the run
can tell)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opsrunner.envnames import refusal as environment_refusal
from opsrunner.errors import Problem, TemplateError
from opsrunner.locks.job_lock import LEASE_VAR, lease_seconds
from opsrunner.taskconnection import delegate_refusal
from opsrunner.tasks import Task
from opsrunner.templating import LazyVars
from opsrunner.valueorigin import quoted

#: Render a value with what preflight knows.
Render = Callable[[Any], Any]


def read_as_template(name: str) -> str:
    """A variable read by name, as a template: followed by valueorigin.names_read to what it reads."""
    return f"{{{{ {name} }}}}"


#: The modules that take a job lock (explicitly, or as kill_old and launch_detached do by their pidfile).
_LOCKING_MODULES = frozenset({"job_lock", "kill_old", "launch_detached", "rollback"})


def lease_problems(task: Task, variables: LazyVars, render: Render, deferred: type[Exception]) -> list[Problem]:
    """`job_lock_lease`, where set, on a task that may take a job lock with it."""
    raw = variables.get(LEASE_VAR) if task.module in _LOCKING_MODULES else None
    if raw is None:
        return []
    where = f"variable {LEASE_VAR} (the lease of the job lock this {task.module} task takes): "
    try:
        value = render(raw)
    except deferred:
        return []
    except TemplateError as exc:
        return [Problem(task.pos, where + exc.bare_message, LEASE_VAR)]
    try:
        lease_seconds(value)
    except ValueError as exc:
        shown = quoted(read_as_template(LEASE_VAR), value, variables)
        return [Problem(task.pos, where + str(exc), LEASE_VAR, quoted=shown)]
    return []


def delegate_problems(task: Task, variables: LazyVars, render: Render, deferred: type[Exception]) -> list[Problem]:
    """`delegate_to`, where known now: a target it may not name (taskconnection.delegate_refusal)."""
    raw = task.kw("delegate_to")
    if raw is None:
        return []
    try:
        target = render(raw)
    except deferred:
        return []
    except TemplateError as exc:
        return [Problem(task.at("delegate_to"), exc.bare_message, "delegate_to")]
    refusal = delegate_refusal(target)
    return [Problem(task.at("delegate_to"), refusal, "delegate_to", quoted=quoted(raw, target, variables))
            ] if refusal else []


def environment_problems(task: Task, variables: LazyVars, render: Render, deferred: type[Exception]) -> list[Problem]:
    """`environment` given by a template (`"{{ train_env }}"`), where known now: a mapping whose
    keys are names (envnames.py; one written as a mapping was checked at load)."""
    raw = task.kw("environment")
    if not isinstance(raw, str) or not raw:  # `""`: no environment, as when the task runs
        return []
    try:
        value = render(raw)
    except deferred:
        return []
    except TemplateError as exc:
        return [Problem(task.at("environment"), exc.bare_message, "environment")]
    why = environment_refusal(value)
    return [Problem(task.at("environment"), why, "environment")] if why is not None else []
