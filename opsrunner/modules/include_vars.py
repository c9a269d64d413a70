"""include_vars: variables from a controller-side file, stored like set_fact's."""

from __future__ import annotations

from typing import Any

from opsrunner.errors import ModuleFailure, TemplateError, ValidationError
from opsrunner.includes import read_vars_file
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult


class IncludeVarsModule(Module):
    name = "include_vars"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        path = ctx.resolve_local(str(args["file"]))
        if not path.is_file():
            raise ModuleFailure(f"include_vars: {args['file']} not found (looked in "
                                f"{', '.join(str(d) for d in ctx.task.search_dirs('vars'))})")
        try:
            data = read_vars_file(path)
        except ValidationError as exc:
            raise ModuleFailure(f"include_vars: {exc.problems[0]}") from None
        except TemplateError as exc:
            raise ModuleFailure(f"include_vars: {exc.bare_message}") from None
        facts = {args["name"]: data} if args.get("name") else data
        return TaskResult(Status.OK, data={"ansible_facts": facts, "ansible_included_var_files": [str(path)]})


MODULE = IncludeVarsModule()
