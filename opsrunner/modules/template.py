"""template: render a Jinja file from the controller with the host's variables, as ansible-core's
template module renders it (templating/template_files.py); write it like copy."""

from __future__ import annotations

from typing import Any

from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.fsutil import put_content
from opsrunner.results import TaskResult
from opsrunner.templating.template_files import FileOptions, include_path, render_file


class TemplateModule(Module):
    name = "template"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        src = ctx.resolve_local(str(args["src"]), "templates")
        if not src.is_file():
            raise ModuleFailure(f"template: src {args['src']} not found (looked in "
                                f"{', '.join(str(d) for d in ctx.task.search_dirs('templates'))})")
        text = src.read_bytes().decode("utf-8")  # as it is: a plain file keeps its \r\n
        search = include_path(ctx.task.search_dirs("templates"), src)
        rendered = render_file(text, ctx.variables, str(src), search, FileOptions.from_args(args))
        return put_content(ctx, str(args["dest"]), rendered.encode("utf-8"), args)


MODULE = TemplateModule()
