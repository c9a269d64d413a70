"""template: render a Jinja file from the controller with the host's variables; write it like copy."""

from __future__ import annotations

from typing import Any

from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.fsutil import put_content
from opsrunner.results import TaskResult
from opsrunner.templating import render


class TemplateModule(Module):
    name = "template"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        src = ctx.resolve_local(str(args["src"]), "templates")
        if not src.is_file():
            raise ModuleFailure(f"template: src {args['src']} not found (looked in "
                                f"{', '.join(str(d) for d in ctx.task.search_dirs('templates'))})")
        text = src.read_text("utf-8")
        rendered = render(text, ctx.variables)
        return put_content(ctx, str(args["dest"]), str(rendered).encode("utf-8"), args)


MODULE = TemplateModule()
