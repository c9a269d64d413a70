"""Controller-side files a module reads as one file: a directory there is bad input.

`copy` and `template` read their `src` as one file (deploy_code copies a directory). Their
schemas name such arguments in `x-opsrunner.local_files`; a relative path is looked up in the
module's role folder first (ModuleInfo.local_folder). The path is found as the run finds it
(Task.local_path), once rendered: preflight tells a directory before any host is touched, at
the argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsrunner.errors import Problem
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
            at, raw = getattr(task.args, "at", None), task.args.get(key)
            origin = f" (from {raw})" if isinstance(raw, str) and is_template(raw) else ""
            problems.append(Problem(at(key) if callable(at) else task.pos,
                                    f"{task.module} {key} '{value}' is a directory ({path}): {task.module} "
                                    f"reads one file (deploy_code copies a directory){origin}", f"{task.module}.{key}"))
    return problems
