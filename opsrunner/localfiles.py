"""Controller-side files a module reads as one file: a directory there is bad input. And
controller-side paths a module reads that do not exist, where nothing earlier in the run can
make them.

`copy` and `template` read their `src` as one file (deploy_code copies a directory). Their
schemas name such arguments in `x-opsrunner.local_files`; a relative path is looked up in the
module's role folder first (ModuleInfo.local_folder). The path is found as the run finds it
(Task.local_path), once rendered: preflight tells a directory before any host is touched, at
the argument.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opsrunner.errors import Problem, TemplateError
from opsrunner.modules.info import module_info
from opsrunner.tasks import Task
from opsrunner.templating import is_template


def directory_problems(task: Task, args: Mapping[str, Any]) -> list[Problem]:
    """A problem for each of the task's one-file arguments that names a directory."""
    info = module_info(task.module)
    problems = []
    for key in info.schema.get("x-opsrunner", {}).get("local_files", []):
        value = args.get(key)
        if not isinstance(value, str) or not value:
            continue
        path = task.local_path(value, info.local_folder)
        if path.is_dir():
            problems.append(_at_key(task, key, f"{task.module} {key} '{value}' is a directory ({path}): "
                                               f"{task.module} reads one file (deploy_code copies a directory)"))
    return problems


def _at_key(task: Task, key: str, message: str) -> Problem:
    """A problem of the task's argument `key`, where the task writes it, saying the template
    that gave the value where one did."""
    at, raw = getattr(task.args, "at", None), task.args.get(key)
    origin = f" (from {raw})" if isinstance(raw, str) and is_template(raw) else ""
    return Problem(at(key) if callable(at) else task.pos, message + origin, f"{task.module}.{key}")


#: Modules that never make a file where they run. A task of any other module (a command, a
#: copy, an include whose tasks are not known yet) that runs on this machine before a task
#: that reads a controller path may be what makes it: a build step delegated to localhost.
MAKE_NO_FILES = frozenset({"job_lock", "debug", "assert", "fail", "set_fact", "stat", "meta", "include_vars",
                           "pause", "wait_for", "setup", "verify", "kill_old", "clear_cache"})


def host_is_local(host_vars: Mapping[str, Any]) -> bool:
    """A host of the local connection: its tasks run on this machine."""
    for name in ("connection", "ansible_connection"):
        with contextlib.suppress(TemplateError):
            value = host_vars.get(name)
            if value is not None:
                return str(value) == "local"
    return False


def may_make_files_here(task: Task, host_is_local: bool) -> bool:
    """Whether `task` may make a file on this machine: one that may make files, run here
    (delegated, on a host of the local connection, or with `connection: local`)."""
    if task.module in MAKE_NO_FILES:
        return False
    return host_is_local or task.kw("delegate_to") is not None or task.kw("connection") is not None


def missing_problems(task: Task, args: Mapping[str, Any]) -> list[Problem]:
    """A problem for each controller path the task reads (`local_files`, `local_paths`) that
    does not exist: deploy_code's `src` named wrong failed only at the deploy, on every host,
    after the run took the job's lock (and a schedule added with it failed every night)."""
    info = module_info(task.module)
    marks = info.schema.get("x-opsrunner", {})
    problems = []
    for key in [*marks.get("local_files", []), *marks.get("local_paths", [])]:
        value = args.get(key)
        if not isinstance(value, str) or not value:
            continue
        path = task.local_path(value, info.local_folder)
        if not path.exists():
            looked = " on this machine" if Path(value).expanduser().is_absolute() else \
                f" (looked in {', '.join(str(d) for d in task.search_dirs(info.local_folder))})"
            problems.append(_at_key(task, key, f"{task.module} {key} '{value}' not found{looked}"))
    return problems
