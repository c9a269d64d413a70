"""A deadline a module's own waiting can never fit in, refused before the run (preflight).

kill_old signals the job, waits up to `grace` seconds for it to exit, then sends SIGKILL to
what is left and confirms it is gone. Under a deadline no longer than the grace, that SIGKILL
would come when the task is already cut off: a job that ignores SIGTERM could never be stopped
(the task would end timed out with the job still running). The deadline the task runs under
(its `timeout`, else the play's) and its `grace` (else the default) are compared when both are
known before the run: written as they are, or rendered from what preflight knows.
"""

from __future__ import annotations

from typing import Any

from opsrunner.coercion import coerce_args
from opsrunner.errors import Problem
from opsrunner.modules.registry import module_info
from opsrunner.tasks import Task


def _grace_default() -> float:
    return float(module_info("kill_old").schema["properties"]["grace"]["default"])


def grace_problems(task: Task, timeout: float, grace: Any) -> list[Problem]:
    """kill_old's `grace` (rendered; None when the task sets none) against the deadline
    `timeout` (seconds) it runs under: a problem when the deadline is not longer."""
    if task.module != "kill_old":
        return []
    default = grace is None
    converted, refusals = coerce_args({"grace": _grace_default() if default else grace},
                                      {"properties": {"grace": {"type": "number"}}})
    if refusals:
        return []  # not a number: the argument check says so
    grace_s = float(converted["grace"])
    if timeout > grace_s:
        return []
    own = task.kw("timeout") is not None
    deadline = f"timeout ({timeout:g} s)" if own else f"the play's timeout ({timeout:g} s), which this task runs under,"
    told = f"grace ({grace_s:g} s{', the default' if default else ''})"
    fix = ("make it longer than the grace, or leave it out (kill_old's default deadline fits its grace)" if own
           else "give the task its own timeout, longer than the grace")
    message = (f"kill_old: {deadline} is not longer than its {told}: the SIGKILL after the grace would come "
               f"past the deadline, so a job that ignores SIGTERM could never be stopped; {fix}")
    if own:
        return [Problem(task.at("timeout"), message, "timeout")]
    at = getattr(task.args, "at", None)
    return [Problem(at("grace") if callable(at) and not default else task.pos, message, "kill_old.grace")]
