"""copy: a controller file (src) or inline content to a file on the target, atomically."""

from __future__ import annotations

import posixpath
from typing import Any

from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.fsutil import put_content
from opsrunner.results import TaskResult


class CopyModule(Module):
    name = "copy"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        dest = str(args["dest"])
        if "content" in args:
            value = args["content"]
            content = value.encode("utf-8") if isinstance(value, str) else str(value).encode("utf-8")
        else:
            src = ctx.resolve_local(str(args["src"]))  # a directory is refused before (localfiles.py)
            if not src.is_file():
                raise ModuleFailure(f"copy: src {args['src']} not found (looked in "
                                    f"{', '.join(str(d) for d in ctx.task.search_dirs('files'))})")
            content = src.read_bytes()
            if dest.endswith("/"):
                dest = posixpath.join(dest, src.name)
        return put_content(ctx, dest, content, args)


MODULE = CopyModule()
