"""template: render a Jinja file from the controller with the host's variables, as ansible-core's
template module renders it (templating/template_files.py); write it like copy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.fsutil import put_content
from opsrunner.modules.info import module_info
from opsrunner.results import TaskResult
from opsrunner.tasks import Task
from opsrunner.templating.template_files import FileOptions, include_path, render_file


class TemplateModule(Module):
    name = "template"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        return put_content(ctx, str(args["dest"]), rendered(ctx.task, args, ctx.variables).encode("utf-8"), args)


def rendered(task: Task, args: Mapping[str, Any], variables: Mapping[str, Any]) -> str:
    """The text the task writes: its src found as the run finds it, rendered with `variables`
    (preflight renders it too, to find an undefined variable before any host is touched)."""
    folder = module_info("template").local_folder
    src = task.local_path(str(args["src"]), folder)
    if not src.is_file():
        raise ModuleFailure(f"template: src {args['src']} not found (looked in "
                            f"{', '.join(str(d) for d in task.search_dirs(folder))})")
    text = src.read_bytes().decode("utf-8")  # as it is: a plain file keeps its \r\n
    search = include_path(task.search_dirs(folder), src)
    return render_file(text, variables, str(src), search, FileOptions.from_args(args))


MODULE = TemplateModule()
